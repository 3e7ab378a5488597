"""SLURM: the pure rules (``rules``, ``commands``, ``parse``, ``states``) and the remote
command sequences (``remote``), joined into the registry's ``SCHEDULER``."""

from __future__ import annotations

from hooks.schedulers.slurm.remote import SlurmRemote
from hooks.schedulers.slurm.rules import SlurmRules


class Slurm(SlurmRules, SlurmRemote):
    """Everything the hooks ask of SLURM."""


SCHEDULER = Slurm()
