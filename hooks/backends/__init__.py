"""Schedulers behind one interface: one module per scheduler, sharing ``base`` and ``guard``."""

from __future__ import annotations

from hooks.backends.base import Backend
from hooks.backends.htcondor import HTCondorBackend
from hooks.backends.slurm import SlurmBackend

BACKENDS: dict[str, Backend] = {"slurm": SlurmBackend(), "htcondor": HTCondorBackend()}


def for_name(name: str) -> Backend:
    """The backend for ``spec.backend``."""
    return BACKENDS[name]
