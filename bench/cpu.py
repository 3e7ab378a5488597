"""CPU seconds of named processes and all their descendants, read from /proc.

A sampler thread walks /proc every ``INTERVAL`` seconds. Each process of a tree counts its own
user and system time plus its reaped descendants' (``cutime`` and ``cstime``, which the kernel
adds to a parent when it waits for a child): a child that starts and ends between two samples
is counted in its parent, and one seen earlier that has ended since is then counted in its
nearest live ancestor, once. Only when the root itself ends do its processes keep their last
samples: what they used after them is lost, and a child reaped between a sample and its
parent's end may count twice; that case is approximate. A process started again (a restart)
has another PID and is not followed."""

from __future__ import annotations

import os
import threading
from pathlib import Path

INTERVAL = 0.5
TICK = os.sysconf("SC_CLK_TCK")
Key = tuple[int, int]
"""A process: its PID and start time (a reused PID is another process)."""


def processes() -> dict[int, tuple[int, int, float]]:
    """Every process: PID → (parent PID, start time, CPU seconds of it and its reaped
    children)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry.name)] = (int(fields[1]), int(fields[19]),
                                  sum(int(f) for f in fields[11:15]) / TICK)
    return table


def tree(root: int, table: dict[int, tuple[int, int, float]]) -> list[int]:
    """Pure: ``root`` and its descendants in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def held(pid: int, parents: dict[int, int], live: set[int]) -> bool:
    """Pure: whether an ended process has a live ancestor (whose reaped time holds its own)."""
    while pid in parents:
        pid = parents[pid]
        if pid in live:
            return True
    return False


class TreeCPU:
    """The CPU seconds of each named process tree, sampled in a daemon thread."""

    def __init__(self, roots: dict[str, int]) -> None:
        self.roots = roots
        self.live: dict[str, dict[Key, tuple[int, float]]] = {name: {} for name in roots}
        """Per tree, each process seen at the last sample: its parent PID and CPU seconds."""
        self.ended = dict.fromkeys(roots, 0.0)
        """Per tree, the CPU seconds of ended processes no live parent holds."""
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="cpu sampler")
        if roots:
            self.sample()
            self.thread.start()

    def sample(self) -> dict[str, float]:
        """Sample every tree now; each one's CPU seconds so far."""
        table = processes()
        with self.lock:
            for name, root in self.roots.items():
                pids = set(tree(root, table))
                parents = {pid: parent for (pid, _), (parent, _) in self.live[name].items()}
                for (pid, _), (_, cpu) in self.live[name].items():
                    if pid not in pids and not held(pid, parents, pids):
                        self.ended[name] += cpu
                self.live[name] = {(pid, table[pid][1]): (table[pid][0], table[pid][2])
                                   for pid in pids}
            return {name: self.ended[name] + sum(cpu for _, cpu in self.live[name].values())
                    for name in self.roots}

    def _run(self) -> None:
        while not self.stop.wait(INTERVAL):
            self.sample()
