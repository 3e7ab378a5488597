"""SLURM's pure rules: the ``spec.slurm`` block, the sbatch options hpcbridge owns, job ids."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hooks.core.values.fields import SpecError, line
from hooks.core.values.job import Resources
from hooks.core.values.sdk import QueueLimit
from hooks.core.values.text import has_control, shown
from hooks.schedulers.slurm import forms
from hooks.schedulers.slurm.directives import directives
from hooks.schedulers.slurm.limited import free_form_settings
from hooks.schedulers.slurm.options import (
    SBATCH_LONG_WITH_VALUE,
    SBATCH_LONG_WITHOUT_VALUE,
    SBATCH_SHORT_FLAGS,
    SBATCH_SHORT_OPTIONAL_VALUE,
    SBATCH_SHORT_WITH_VALUE,
)

RESERVED_LONG = (
    "job-name", "output", "error", "array", "parsable", "comment", "chdir", "wrap",
)
RESERVED_SHORT = frozenset("JoeaD")
NOT_A_SUBMISSION_LONG = ("wait", "test-only", "help", "usage", "version")
NOT_A_SUBMISSION_SHORT = frozenset("WhV")
"""Options that make sbatch do something else than submit and return: wait for the job's end
(``--wait``/``-W``, which held the submission until then), only test it (``--test-only``) or
print and exit (``--help``/``-h``, ``--usage``, ``--version``/``-V``)."""

@dataclass(frozen=True, slots=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    array: str | None = None
    array_tasks: tuple[int, ...] = ()
    extra_args: tuple[str, ...] = ()


TASK_ID = re.compile(r"([0-9]{1,20})(?:[_+][0-9]{1,10}|_\[[0-9,%-]{1,256}\])?")
"""A task id as SLURM reports one, group 1 its job: ``4242``, ``4242_3``, ``4242+1`` or
``4242_[1-3]``. Stored ids go to ``scontrol hold`` and ``scancel``, so nothing else is ever
taken: no option (``-u``), no list (``1,2``) and no ``jobname=``."""


class SlurmRules:
    name = "slurm"
    task_id_pattern = TASK_ID
    queue_limit: QueueLimit | None = QueueLimit("partition", "partitions")
    parallel_launcher: tuple[str, ...] = ("srun",)
    own_containers = False

    def parse_options(self, raw: Mapping[str, Any], resources: Resources) -> SlurmOptions:
        """The ``spec.slurm`` block. Pure: no I/O."""
        array = line(raw.get("array"), "spec.slurm.array")
        try:
            tasks = forms.parse_array(array) if array else ()
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

    def check_script(self, script: str) -> None:
        """Options in the script's directives are options on the command line too: those
        refused in ``spec.slurm.extraArgs`` are refused there, in every form (``--chdir=/x``,
        ``--chdir /x``, ``--ch=/x``, ``-D/x``, ``-vD /x``), even an element sbatch would take
        as the value of the option before it (``--comment -J``): never meant, and reading it
        as sbatch might could only miss one.

        >>> SlurmRules().check_script("#!/bin/sh\\n#SBATCH -p debug --ch /x\\n")
        Traceback (most recent call last):
        hooks.core.values.fields.SpecError: spec.script line 2 (...) sets --chdir...
        """
        for number, text, args in directives(script):
            for option in filter(None, map(reserved_option, args)):
                raise SpecError(f"spec.script line {number} ({shown(text)}) sets {option}, "
                                f"{refusal(option)}; remove it.")

    def free_form_settings(self, options: SlurmOptions, script: str
                           ) -> Iterator[tuple[str, str]]:
        """The limited quantities ``spec.slurm.extraArgs`` and ``#SBATCH`` directives set
        (``hooks.schedulers.slurm.limited``)."""
        return free_form_settings(options.extra_args, script)

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
    """The sbatch option hpcbridge refuses that ``arg`` would set, if any (abbreviations
    included): one hpcbridge manages (``RESERVED_*``) or one that makes sbatch do something
    else than submit (``NOT_A_SUBMISSION_*``).

    >>> reserved_option("--out=/tmp/x"), reserved_option("-Jname")
    ('--output', '-J')
    >>> [reserved_option(a) for a in ("-vJx", "--wait", "--test", "-vW")]
    ['-J', '--wait', '--test-only', '-W']
    >>> reserved_option("--constraint=haswell") is None
    True
    """
    if arg.startswith("--"):
        name = arg[2:].split("=", 1)[0]
        for reserved in (*RESERVED_LONG, *NOT_A_SUBMISSION_LONG):
            if name and reserved.startswith(name):
                return f"--{reserved}"
        return None
    if arg.startswith("-"):
        for letter in arg[1:]:
            if letter in RESERVED_SHORT | NOT_A_SUBMISSION_SHORT:
                return f"-{letter}"
            if letter not in SBATCH_SHORT_FLAGS:
                return None
    return None


def refusal(option: str) -> str:
    """Why ``option`` (an answer of ``reserved_option``) is refused."""
    if option.lstrip("-") in NOT_A_SUBMISSION_LONG or option[1:] in NOT_A_SUBMISSION_SHORT:
        return "which makes sbatch wait, test or print instead of submitting the job"
    return "which hpcbridge manages"


def missing_value(arg: str) -> str | None:
    """Why sbatch would take the *next* argument as the value of an option in ``arg``, if it
    might: ``arg`` ends in an option that takes a value, or in one sbatch does not document,
    without an attached value (sbatch's next argument is the batch script's name).

    >>> missing_value("-p"), missing_value("--part"), missing_value("-Hp")
    ('-p takes a value', '--partition takes a value', '-p takes a value')
    >>> [missing_value(a) for a in ("-pdebug", "--partition=debug", "--exclusive", "-H", "--wait")]
    [None, None, None, None, None]
    """
    if arg.startswith("--"):
        name, attached, _ = arg[2:].partition("=")
        if attached or name in SBATCH_LONG_WITHOUT_VALUE:
            return None
        taking = sorted(o for o in SBATCH_LONG_WITH_VALUE if o.startswith(name))
        if name in SBATCH_LONG_WITH_VALUE or taking:
            return f"--{name if name in SBATCH_LONG_WITH_VALUE else taking[0]} takes a value"
        if any(o.startswith(name) for o in SBATCH_LONG_WITHOUT_VALUE):
            return None
        return f"--{name} is not an option sbatch documents, so it may take one"
    for at, letter in enumerate(arg[1:], start=2):
        if letter in SBATCH_SHORT_FLAGS:
            continue
        if letter in SBATCH_SHORT_OPTIONAL_VALUE:
            return None
        if letter in SBATCH_SHORT_WITH_VALUE:
            return None if at < len(arg) else f"-{letter} takes a value"
        return f"-{letter} is not an option sbatch documents, so it may take one"
    return None


def _check_extra_args(args: list[str]) -> None:
    """Each element is one option with its value attached (``--name=value``, ``-pdebug``):
    a separate value, an option left without its value or a bare ``--`` could make sbatch take
    a path as the batch script."""
    for arg in args:
        if has_control(arg):
            raise SpecError("spec.slurm.extraArgs has a control character (a newline, NUL...) "
                            "in an argument; remove it.")
        reserved = reserved_option(arg)
        if reserved:
            raise SpecError(
                f"spec.slurm.extraArgs sets {reserved}, {refusal(reserved)}; remove it."
            )
        if not arg.startswith("-") or arg in ("-", "--"):
            raise SpecError(
                f"spec.slurm.extraArgs has {shown(arg)}; write each option with its value in "
                "one element, like --constraint=haswell."
            )
        missing = missing_value(arg)
        if missing:
            raise SpecError(
                f"spec.slurm.extraArgs has {shown(arg)}, but {missing}: attach it in the same "
                "element (--partition=debug, -pdebug), or sbatch would take the next argument, "
                "the batch script, as its value."
            )
