"""The schedulers, one package each (``slurm``, ``htcondor``), joined in ``registry``, which the
spec parser, the hook executor and the log Pod read. ``base`` is the contract each implements;
``guard`` and ``shell`` are the remote programs they share."""
