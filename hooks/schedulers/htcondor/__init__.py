"""HTCondor: the pure rules (``rules``, ``description``, ``commands``, ``parse``, ``states``)
and the remote command sequences (``remote``), joined in ``scheduler`` into the registry's
``SCHEDULER``."""
