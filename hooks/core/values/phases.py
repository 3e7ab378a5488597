"""Phases of a BatchJob and what the scheduler says of one task: its outcome, state and usage."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hooks.core.values.reasons import Reason

if TYPE_CHECKING:
    pass


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    UNKNOWN = "Unknown"


TERMINAL_PHASES = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})


class Outcome(enum.StrEnum):
    """Where one task (SLURM job or array task, HTCondor proc) stands."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def is_active(self) -> bool:
        """Pending or running: the task has not ended."""
        return self in (Outcome.PENDING, Outcome.RUNNING)


@dataclass(frozen=True, slots=True)
class TaskUsage:
    """What one ended task used, as the scheduler's accounting recorded it; a field it did
    not record is None."""

    queue_seconds: int | None = None
    elapsed_seconds: int | None = None
    cpu_seconds: float | None = None
    """User and system CPU time of the task."""
    max_rss_bytes: int | None = None
    nodes: tuple[str, ...] = ()
    cpus: int | None = None
    """The CPUs allocated to the task."""
    memory_bytes: int | None = None
    """The memory the task requested."""


@dataclass(frozen=True, slots=True)
class TaskState:
    """One task as the scheduler reports it, already mapped to our terms."""

    task_id: str
    outcome: Outcome
    reason: Reason = Reason.NONE
    message: str = ""
    exit_code: int | None = None
    submit_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    scheduler_reason: str = ""
    """The scheduler's own word for why a pending task waits (SLURM ``Priority``,
    ``PartitionTimeLimit``), as it says it; empty when it gives none."""
    signal: int | None = None
    """The signal that ended the task, if one did."""
    usage: TaskUsage | None = None
    """What an ended task used, when its accounting was read."""


