"""HTCondor's rules and remote commands joined: everything the hooks ask of HTCondor."""

from __future__ import annotations

from hooks.schedulers.htcondor.remote import HTCondorRemote
from hooks.schedulers.htcondor.rules import HTCondorRules


class HTCondor(HTCondorRules, HTCondorRemote):
    """Everything the hooks ask of HTCondor."""


SCHEDULER = HTCondor()
