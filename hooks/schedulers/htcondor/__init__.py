"""HTCondor: the pure rules (``rules``, ``description``, ``commands``, ``parse``, ``states``)
and the remote command sequences (``remote``), joined into the registry's ``SCHEDULER``."""

from __future__ import annotations

from hooks.schedulers.htcondor.remote import HTCondorRemote
from hooks.schedulers.htcondor.rules import HTCondorRules


class HTCondor(HTCondorRules, HTCondorRemote):
    """Everything the hooks ask of HTCondor."""


SCHEDULER = HTCondor()
