"""SLURM's rules and remote commands joined: everything the hooks ask of SLURM."""

from __future__ import annotations

from hooks.schedulers.slurm.remote import SlurmRemote
from hooks.schedulers.slurm.rules import SlurmRules


class Slurm(SlurmRules, SlurmRemote):
    """Everything the hooks ask of SLURM."""


SCHEDULER = Slurm()
