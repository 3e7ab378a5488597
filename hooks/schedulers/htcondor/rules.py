"""HTCondor's pure rules: the ``spec.htcondor`` block, the submit commands hpcbridge owns,
and proc ids (``15.3`` is proc 3 of cluster 15)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hooks.core.model import Resources
from hooks.core.spec import SpecError, mapping, whole_number

RESERVED_KEYS = frozenset(
    {
        "executable", "arguments", "output", "error", "log", "queue", "universe",
        "leave_in_queue", "batch_name", "+hpcbridgekey", "my.hpcbridgekey",
        # Beyond the API's list: each would move the outputs or undo the time limit.
        "initialdir", "transfer_output_remaps", "+periodicremove", "my.periodicremove",
        "+leavejobinqueue", "my.leavejobinqueue", "+jobbatchname", "my.jobbatchname",
    }
)


@dataclass(frozen=True, slots=True)
class HTCondorOptions:
    queue: int = 1
    submit_options: tuple[tuple[str, str], ...] = ()


class HTCondorRules:
    name = "htcondor"

    def parse_options(self, raw: Mapping[str, Any], resources: Resources) -> HTCondorOptions:
        """The ``spec.htcondor`` block. Pure: no I/O."""
        if resources.nodes is not None:
            raise SpecError("spec.resources.nodes applies to SLURM only; remove it for HTCondor.")
        queue = whole_number(raw.get("queue", 1), "spec.htcondor.queue", minimum=1,
                             maximum=10000)
        options = mapping(raw.get("submitOptions") or {}, "spec.htcondor.submitOptions")
        return HTCondorOptions(queue=queue, submit_options=tuple(
            _submit_option(key, value) for key, value in sorted(options.items())))

    def expected_tasks(self, options: HTCondorOptions, job_id: str) -> tuple[str, ...]:
        return tuple(f"{job_id}.{proc}" for proc in range(options.queue))

    def job_id(self, task_id: str) -> str:
        return job_id(task_id)


def job_id(task_id: str) -> str:
    """The cluster id of a proc id (``15.3`` → ``15``)."""
    return task_id.split(".", 1)[0]


def _submit_option(key: str, value: object) -> tuple[str, str]:
    if not isinstance(value, str):
        raise SpecError(f"spec.htcondor.submitOptions[{key!r}] must be a string.")
    if "\n" in key or "\r" in key or "\n" in value or "\r" in value:
        first_line = (key.splitlines() or [""])[0]
        raise SpecError(
            f"spec.htcondor.submitOptions[{first_line!r}] contains a newline, "
            "which would start a new submit command."
        )
    if not _submit_key_ok(key):
        raise SpecError(
            f"spec.htcondor.submitOptions has key {key!r}; keys are submit commands like "
            "request_disk or +Attribute."
        )
    if key.lower() in RESERVED_KEYS:
        raise SpecError(
            f"spec.htcondor.submitOptions sets {key!r}, which hpcbridge manages; remove it."
        )
    return key, value


def _submit_key_ok(key: str) -> bool:
    body = key[1:] if key.startswith("+") else key
    body = body[3:] if body.lower().startswith("my.") else body
    return bool(body) and all(c.isalnum() or c in "_." for c in body)
