"""The results file: each benchmark owns one section of ``bench/results.md`` and replaces only
that section, so the sync benchmark, the follow-Pod benchmark and the others share one file."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

TITLE = "# Benchmarks of hpcbridge"


def machine() -> str:
    """One line about where the figures were measured."""
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor())
    return (f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; machine: "
            f"{os.cpu_count()} cores ({cpu}), "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**30} GiB, "
            f"{platform.system()} {platform.release()}; load generator on the same machine")


def update(path: Path, section: str, text: str) -> None:
    """Put ``text`` as section ``section`` of the results file, keeping the other sections."""
    begin, end = f"<!-- {section}: begin -->", f"<!-- {section}: end -->"
    old = path.read_text() if path.exists() else ""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in old and end in old:
        head, _, rest = old.partition(begin)
        _, _, tail = rest.partition(end)
        new = head + block + tail
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else f"{TITLE}\n\n") + block + "\n"
    path.write_text(new)
