"""What the core needs of a scheduler: its name, its spec block, its job and task ids, and the
files it writes in an attempt's directory.

Each scheduler package (``hooks.schedulers.slurm``, ``hooks.schedulers.htcondor``) provides these
pure rules next to its remote commands; the core receives them as arguments (the registry), so
it never imports a scheduler and a new scheduler needs no change here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hooks.core.values.job import Resources

LIMITED = ("queue", "timeLimit", "cpus", "memory", "gpus", "nodes")
"""What a BatchCluster's limits cover: the queue (SLURM's partition) and the fields of
``spec.resources``."""


@dataclass(frozen=True, slots=True)
class QueueLimit:
    """How a BatchCluster restricts the queues of a scheduler that has them: ``option``, the
    field of the scheduler's block that names one (SLURM's ``partition``), and ``limit``, the
    BatchCluster's ``spec.limits`` key that lists those allowed (``partitions``)."""

    option: str
    limit: str


class SchedulerRules(Protocol):
    name: str
    task_id_pattern: re.Pattern[str]
    """The full form of a task id as the scheduler reports one, group 1 its job. Stored ids
    go to the scheduler's commands, so the pattern admits nothing else: no option, no list."""
    queue_limit: QueueLimit | None
    """Whether a BatchCluster may restrict the scheduler's queues, and by which fields; None
    for a scheduler without queues to choose (HTCondor)."""
    parallel_launcher: tuple[str, ...]
    """The command that starts one copy of a program per task across a job's nodes (SLURM's
    ``srun``): a ``spec.container`` job of more than one node runs its container under it,
    one per task (the hybrid model of MPI with containers). Empty: none."""
    own_containers: bool
    """Whether the scheduler runs an image itself where its execute nodes advertise a runtime
    (HTCondor's ``container_image``): the hooks then ask it (``container_support``) before a
    ``spec.container`` job is submitted, and a site that lists no runtime of its own may
    still run images."""

    def parse_options(self, raw: Mapping[str, Any], resources: Resources) -> Any:
        """The scheduler's spec block (``{}`` when absent), validated with the resources it
        constrains; raises ``hooks.core.values.fields.SpecError`` naming the field. Pure."""
        ...

    def check_script(self, script: str) -> None:
        """Refuse what the scheduler would read in the batch script against hpcbridge's own
        settings (SLURM's ``#SBATCH`` directives); raises ``hooks.core.values.fields.SpecError``
        naming the line. Pure."""
        ...

    def free_form_settings(self, options: Any, script: str) -> Iterable[tuple[str, str]]:
        """Where the scheduler's free-form options (a parsed block's, the script's) set one of
        ``LIMITED``: (what sets it, for a message, the quantity). A BatchCluster that limits
        the quantity refuses them, so that its limits cover what reaches the scheduler. Pure."""
        ...

    def expected_tasks(self, options: Any, job_id: str) -> tuple[str, ...]:
        """The task ids a job submitted with ``options`` will show (array tasks, procs)."""
        ...

    def job_id(self, task_id: str) -> str:
        """The id of the job (SLURM array, HTCondor cluster) a task id belongs to."""
        ...

    def writes_file(self, name: str) -> bool:
        """Whether the scheduler writes a file of this name at the top of an attempt's
        directory (its script, description, answers, its tasks' output), which no input file
        may take."""
        ...


Rules = Mapping[str, SchedulerRules]
"""The schedulers by ``spec.backend`` name."""


class SchedulerError(Exception):
    """The scheduler did not answer (e.g. slurmctld down); transient, the cluster is reachable."""
