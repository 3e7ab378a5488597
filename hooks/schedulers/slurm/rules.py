"""SLURM's pure rules: the ``spec.slurm`` block, the sbatch options hpcbridge owns, job ids."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hooks.core import units
from hooks.core.model import Resources
from hooks.core.spec import SpecError, line
from hooks.core.text import has_control

RESERVED_LONG = (
    "job-name", "output", "error", "array", "parsable", "comment", "chdir", "wrap",
)
RESERVED_SHORT = frozenset("JoeaD")
SHORT_FLAGS = frozenset("HhkOQsuVvW")
"""sbatch's short options that take no value: others may be bundled after them (``-vJx``)."""


@dataclass(frozen=True, slots=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    array: str | None = None
    array_tasks: tuple[int, ...] = ()
    extra_args: tuple[str, ...] = ()


class SlurmRules:
    name = "slurm"

    def parse_options(self, raw: Mapping[str, Any], resources: Resources) -> SlurmOptions:
        """The ``spec.slurm`` block. Pure: no I/O."""
        array = line(raw.get("array"), "spec.slurm.array")
        try:
            tasks = units.parse_array(array) if array else ()
        except ValueError as err:
            raise SpecError(f"spec.slurm.array: {err}.") from err
        extra = raw.get("extraArgs") or []
        if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
            raise SpecError("spec.slurm.extraArgs must be a list of strings.")
        _check_extra_args(extra)
        return SlurmOptions(
            partition=line(raw.get("partition"), "spec.slurm.partition"),
            account=line(raw.get("account"), "spec.slurm.account"),
            qos=line(raw.get("qos"), "spec.slurm.qos"),
            array=array,
            array_tasks=tasks,
            extra_args=tuple(extra),
        )

    def expected_tasks(self, options: SlurmOptions, job_id: str) -> tuple[str, ...]:
        if options.array_tasks:
            return tuple(f"{job_id}_{i}" for i in options.array_tasks)
        return (job_id,)

    def job_id(self, task_id: str) -> str:
        return job_id(task_id)


def job_id(task_id: str) -> str:
    """The array's id of a task id (``4242_3`` → ``4242``)."""
    return task_id.split("_", 1)[0]


def reserved_option(arg: str) -> str | None:
    """The reserved sbatch option ``arg`` would set, if any (abbreviations included).

    >>> reserved_option("--out=/tmp/x"), reserved_option("-Jname")
    ('--output', '-J')
    >>> reserved_option("-vJx")
    '-J'
    >>> reserved_option("--constraint=haswell") is None
    True
    """
    if arg.startswith("--"):
        name = arg[2:].split("=", 1)[0]
        for reserved in RESERVED_LONG:
            if name and reserved.startswith(name):
                return f"--{reserved}"
        return None
    if arg.startswith("-"):
        for letter in arg[1:]:
            if letter in RESERVED_SHORT:
                return f"-{letter}"
            if letter not in SHORT_FLAGS:
                return None
    return None


def _check_extra_args(args: list[str]) -> None:
    """Each element is one option with its value attached (``--name=value``, ``-pdebug``):
    a separate value or a bare ``--`` could make sbatch take a path as the batch script."""
    for arg in args:
        if has_control(arg):
            raise SpecError("spec.slurm.extraArgs has a control character (a newline, NUL...) "
                            "in an argument; remove it.")
        reserved = reserved_option(arg)
        if reserved:
            raise SpecError(
                f"spec.slurm.extraArgs sets {reserved}, which hpcbridge manages; remove it."
            )
        if not arg.startswith("-") or arg == "--":
            raise SpecError(
                f"spec.slurm.extraArgs has {arg!r}; write each option with its value in one "
                "element, like --constraint=haswell."
            )
