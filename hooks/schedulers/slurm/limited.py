"""Which of sbatch's options set what a BatchCluster limits (``hooks.core.values.sdk.LIMITED``):
the partition, the time limit, the CPUs, memory, GPUs and nodes of a job. Pure: no I/O.

``spec.slurm.extraArgs`` and the script's ``#SBATCH`` directives come after the options
hpcbridge writes from ``spec.resources`` and ``spec.slurm`` (sbatch takes the last of an option),
so a BatchJob whose BatchCluster limits a quantity may not set it there. Read from sbatch(1)
of Slurm 22.05 to 25.11; an option that asks for more of a quantity counts, whatever its value
(``--exclusive`` takes a node's every CPU, ``--ntasks`` multiplies ``--cpus-per-task``); one
that sends the job to another cluster of a federation (``--clusters``) picks its partition.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from hooks.core.values.sdk import LIMITED
from hooks.core.values.text import shown
from hooks.schedulers.slurm.directives import directives
from hooks.schedulers.slurm.options import (
    SBATCH_LONG_WITH_VALUE,
    SBATCH_LONG_WITHOUT_VALUE,
    SBATCH_SHORT_FLAGS,
)

LIMITED_LONG: Mapping[str, tuple[str, ...]] = {
    "partition": ("queue",),
    "time": ("timeLimit",),
    "cpus-per-task": ("cpus",), "ntasks": ("cpus",), "ntasks-per-node": ("cpus",),
    "ntasks-per-core": ("cpus",), "ntasks-per-socket": ("cpus",), "mincpus": ("cpus",),
    "cores-per-socket": ("cpus",), "sockets-per-node": ("cpus",),
    "threads-per-core": ("cpus",), "extra-node-info": ("cpus",), "exclusive": ("cpus",),
    "cpus-per-gpu": ("cpus",), "ntasks-per-gpu": ("cpus", "gpus"),
    "tres-per-task": ("cpus", "gpus"),
    "mem": ("memory",), "mem-per-cpu": ("memory",), "mem-per-gpu": ("memory",),
    "gpus": ("gpus",), "gpus-per-node": ("gpus",), "gpus-per-socket": ("gpus",),
    "gpus-per-task": ("gpus",), "gres": ("gpus",),
    "nodes": ("nodes",), "nodelist": ("nodes",), "nodefile": ("nodes",),
    "clusters": ("queue",), "cluster-constraint": ("queue",),
}
LIMITED_SHORT: Mapping[str, str] = {
    "p": "partition", "t": "time", "c": "cpus-per-task", "n": "ntasks", "B": "extra-node-info",
    "G": "gpus", "N": "nodes", "w": "nodelist", "F": "nodefile", "M": "clusters",
}
KNOWN_LONG = SBATCH_LONG_WITH_VALUE | SBATCH_LONG_WITHOUT_VALUE
COMPONENT = ("hetjob", "packjob")
"""A directive that starts another component of a heterogeneous job: none of the options
hpcbridge writes bound it, so it sets every quantity (``#SBATCH hetjob``, ``packjob`` of old)."""


def limited_option(arg: str) -> str | None:
    """The option setting a limited quantity that ``arg`` would give sbatch, if any, in every
    form (``--time=9:00:00``, an abbreviation ``--ti=...`` or ``--ex``, ``-t9:00``, ``-vN2``): an
    abbreviation that might be one of them is taken for it.

    >>> [limited_option(a) for a in ("--part=gpu", "-vN2", "--mem-per-cpu=9G", "-t", "--ex")]
    ['--partition', '-N', '--mem-per-cpu', '-t', '--exclusive']
    >>> [limited_option(a) for a in ("--time-min=1", "--mem-bind=local", "-vx", "debug")]
    [None, None, None, None]
    """
    if arg.startswith("--"):
        name = arg[2:].split("=", 1)[0]
        if name in KNOWN_LONG:
            return f"--{name}" if name in LIMITED_LONG else None
        taken = sorted(option for option in LIMITED_LONG if name and option.startswith(name))
        return f"--{taken[0]}" if taken else None
    if arg.startswith("-"):
        for letter in arg[1:]:
            if letter in LIMITED_SHORT:
                return f"-{letter}"
            if letter not in SBATCH_SHORT_FLAGS:
                return None
    return None


def covers(option: str) -> tuple[str, ...]:
    """The quantities an answer of ``limited_option`` sets."""
    return LIMITED_LONG[LIMITED_SHORT.get(option[1:], option[2:])]


def free_form_settings(extra_args: Sequence[str], script: str) -> Iterator[tuple[str, str]]:
    """(where, quantity) for each limited quantity set in ``spec.slurm.extraArgs`` or in
    the script's ``#SBATCH`` directives."""
    for arg in extra_args:
        option = limited_option(arg)
        if option:
            for quantity in covers(option):
                yield f"spec.slurm.extraArgs {shown(arg)} ({option})", quantity
    for number, text, args in directives(script):
        if any(arg.lower() in COMPONENT for arg in args):
            for quantity in LIMITED:
                yield (f"spec.script line {number} ({shown(text)}: a component of a "
                       "heterogeneous job, with resources of its own)"), quantity
        for option in filter(None, map(limited_option, args)):
            for quantity in covers(option):
                yield f"spec.script line {number} ({shown(text)}: {option})", quantity
