"""The schedulers, one package each, in one registry read by the spec parser, the hook
executor and the log Pod. A new scheduler is a new package (see ``docs/schedulers.md``) plus
one line here."""

from __future__ import annotations

from hooks.schedulers import htcondor, slurm
from hooks.schedulers.base import Registry

REGISTRY: Registry = {
    "slurm": slurm.SCHEDULER,
    "htcondor": htcondor.SCHEDULER,
}
