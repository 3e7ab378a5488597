"""SLURM: the pure rules (``rules``, ``commands``, ``parse``, ``states``) and the remote
command sequences (``remote``), joined in ``scheduler`` into the registry's ``SCHEDULER``."""
