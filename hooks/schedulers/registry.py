"""The registry of schedulers by ``spec.backend`` name, read by the spec parser, the hook executor
and the log Pod. A new scheduler is a new package (see ``docs/schedulers.md``) plus one line
here."""

from __future__ import annotations

from hooks.schedulers.base import Registry
from hooks.schedulers.htcondor import scheduler as htcondor
from hooks.schedulers.slurm import scheduler as slurm

REGISTRY: Registry = {
    "slurm": slurm.SCHEDULER,
    "htcondor": htcondor.SCHEDULER,
}
