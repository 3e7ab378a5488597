"""SLURM's written forms: the time limit sbatch takes, and the ``--array`` grammar (of
``spec.slurm.array`` and of squeue's pending arrays)."""

from __future__ import annotations

import re

from hooks.core.values.text import shown

MAX_ARRAY_TASKS = 100_000
MAX_INDEX_DIGITS = 10
"""The most digits of a number in an array: SLURM's indices stay below ``MaxArraySize``
(at most 4000001), so a longer number is no index (and never reaches ``int``)."""
_ARRAY_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")
_NUMBER = re.compile(f"[0-9]{{1,{MAX_INDEX_DIGITS}}}")


def slurm_time(seconds: int) -> str:
    """SLURM's ``days-hours:minutes:seconds`` form of a limit.

    >>> slurm_time(5400)
    '0-01:30:00'
    """
    minutes, secs = divmod(seconds, 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    return f"{days}-{hrs:02d}:{mins:02d}:{secs:02d}"


def parse_array(text: str) -> tuple[int, ...]:
    """The task indices of a SLURM ``--array`` value (``0-3``, ``1,3,5-9:2``, ``0-99%10``);
    ``ValueError`` says in one clause what is wrong with ``text`` (shown short).

    >>> parse_array("1,3,5-9:2%2")
    (1, 3, 5, 7, 9)
    >>> parse_array("0-" + "9" * 5000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: '0-999... has a number of more than 10 digits, which is no task index
    """
    body, percent, throttle = text.partition("%")
    if percent and not _NUMBER.fullmatch(throttle):
        raise ValueError(f"{shown(text)}: the part after % must be a number of concurrent tasks")
    tasks: set[int] = set()
    for item in body.split(","):
        match = _ARRAY_ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"{shown(text)} is not an array like 0-3, 1,5,7 or 0-15:4")
        if any(len(number) > MAX_INDEX_DIGITS for number in match.groups() if number):
            raise ValueError(f"{shown(text)} has a number of more than {MAX_INDEX_DIGITS} "
                             "digits, which is no task index")
        first, last, step = match.groups()
        start, stop = int(first), int(last) if last else int(first)
        stride = int(step) if step else 1
        if stop < start or stride <= 0:
            raise ValueError(f"{shown(text)}: range {shown(item)} is empty")
        if (stop - start) // stride + len(tasks) >= MAX_ARRAY_TASKS:
            raise ValueError(f"{shown(text)} has more than {MAX_ARRAY_TASKS} tasks")
        tasks.update(range(start, stop + 1, stride))
    return tuple(sorted(tasks))
