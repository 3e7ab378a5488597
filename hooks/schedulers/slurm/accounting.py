"""SLURM's accounting of an ended task (sacct's ``Elapsed``, ``TotalCPU``, ``MaxRSS``,
``NodeList``, ``AllocCPUS``, ``ReqMem``) read into a ``TaskUsage``. Pure: no I/O.

sacct prints ``MaxRSS`` on the steps only (``4242.batch``, ``4242.0``), from jobacct_gather's
periodic samples (``JobAcctGatherFrequency``): a task shorter than one sample has none, and it is
then unknown, never 0. The allocation's line carries the rest.
"""

from __future__ import annotations

import datetime
import re

from hooks.core.values.phases import TaskUsage

MAX_NODES = 1024
"""Host names expanded from one node list at most."""
_DURATION = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.(\d+))?")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([KMGTP]?)[nc]?")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_RANGE = re.compile(r"(\d+)-(\d+)")


def usage(
    *, submit: str, start: str, elapsed: str, total_cpu: str, max_rss: str, nodes: str,
    cpus: str, requested_memory: str,
) -> TaskUsage:
    """The usage of one task from its sacct fields (times in UTC, ``2026-11-22T10:00:05``).

    >>> usage(submit="2026-11-27T00:08:41", start="2026-11-27T00:08:43", elapsed="00:00:40",
    ...       total_cpu="00:38.600", max_rss="214708K", nodes="vm", cpus="1",
    ...       requested_memory="512M")  # doctest: +NORMALIZE_WHITESPACE
    TaskUsage(queue_seconds=2, elapsed_seconds=40, cpu_seconds=38.6, max_rss_bytes=219860992,
              nodes=('vm',), cpus=1, memory_bytes=536870912)
    """
    submitted, started = _moment(submit), _moment(start)
    queued = int((started - submitted).total_seconds()) if submitted and started else None
    return TaskUsage(
        queue_seconds=max(queued, 0) if queued is not None else None,
        elapsed_seconds=_int(duration(elapsed)),
        cpu_seconds=duration(total_cpu),
        max_rss_bytes=size(max_rss),
        nodes=host_names(nodes),
        cpus=int(cpus) if cpus.isdigit() and int(cpus) > 0 else None,
        memory_bytes=size(requested_memory) or None,
    )


def duration(text: str) -> float | None:
    """``[DD-][HH:]MM:SS[.mmm]`` in seconds (sacct's Elapsed and TotalCPU).

    >>> [duration(t) for t in ("00:00:40", "1-02:03:04", "01:02.500", "", "INVALID")]
    [40.0, 93784.0, 62.5, None, None]
    """
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        return None
    days, hours, minutes, seconds, fraction = found.groups()
    whole = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60
             + int(seconds))
    return whole + (float(f"0.{fraction}") if fraction else 0.0)


def size(text: str) -> int | None:
    """A size as sacct prints it (``214708K``, ``4G``, ``512Mn``), in bytes.

    >>> [size(t) for t in ("214708K", "4G", "512Mn", "0", "", "16?")]
    [219860992, 4294967296, 536870912, 0, None, None]
    """
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        return None
    return int(float(found.group(1)) * _UNITS[found.group(2)])


def host_names(text: str) -> tuple[str, ...]:
    """A SLURM host list (``node[01-03,07],gpu1``) as host names; none for ``None assigned``.

    >>> host_names("node[01-03,07],gpu1")
    ('node01', 'node02', 'node03', 'node07', 'gpu1')
    """
    text = text.strip()
    if not text or " " in text or text == "(null)":
        return ()
    names: list[str] = []
    for prefix, ranges, suffix in re.findall(r"([^,\[]+)(?:\[([^\]]*)\])?([^,\[]*)", text):
        for number in _numbers(ranges) if ranges else [""]:
            names.append(f"{prefix}{number}{suffix}")
            if len(names) >= MAX_NODES:
                return tuple(names)
    return tuple(names)


def _numbers(ranges: str) -> list[str]:
    found: list[str] = []
    for part in ranges.split(","):
        span = _RANGE.fullmatch(part)
        if span is None:
            found.append(part)
            continue
        first, last = span.groups()
        stop = min(int(last), int(first) + MAX_NODES - 1)
        found += [str(n).zfill(len(first)) for n in range(int(first), stop + 1)]
    return found


def _moment(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None


def _int(value: float | None) -> int | None:
    return int(value) if value is not None else None
