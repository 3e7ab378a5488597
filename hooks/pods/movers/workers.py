"""Copies of small files beside the main thread, ``WORKERS`` at a time. A small file's cost is
round trips (an SFTP open, read and close; an object's stat and put; a file's and its directory's
fsync), not bytes, so the mover waits for several at once: over SFTP (``each``) each worker
has an SFTP session of its own on the one SSH connection (a session's reads are pipelined by
one thread, ``hooks.ssh.files``); from a tar stream (``Pool``) the main thread reads the files
and the workers write them. At most ``2 * WORKERS`` copies are queued at a time, so memory does
not grow with the number of files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from hooks.ssh.client import Connection
from hooks.ssh.files import RemoteFiles

WORKERS = 4
Job = TypeVar("Job")
Result = TypeVar("Result")


def each(conn: Connection, jobs: Iterable[Job], copy: Callable[[RemoteFiles, Job], int]) -> int:
    """``copy`` every job, ``WORKERS`` at a time, and the sum of what the copies answered; the
    first copy that raises stops the rest (those already running end their file)."""
    local = threading.local()
    opened: list[RemoteFiles] = []
    lock = threading.Lock()

    def run(job: Job) -> int:
        files = getattr(local, "files", None)
        if files is None:
            files = local.files = RemoteFiles(conn)
            with lock:
                opened.append(files)
        return copy(files, job)

    total = 0
    pending: set[Future[int]] = set()
    try:
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="copy") as pool:
            try:
                for job in jobs:
                    if len(pending) >= 2 * WORKERS:
                        done, pending = wait(pending, return_when=FIRST_COMPLETED)
                        total += sum(f.result() for f in done)
                    pending.add(pool.submit(run, job))
                total += sum(f.result() for f in wait(pending).done)
            except BaseException:
                for future in pending:
                    future.cancel()
                raise
    finally:
        for files in opened:
            files.close()
    return total


class Pool:
    """Copies handed to ``WORKERS`` threads as the main thread reads them, at most
    ``2 * WORKERS`` waiting (each holds a small file's bytes); the first copy that raises is
    raised again by the next ``submit`` or at the end of the ``with``."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="copy")
        self.pending: set[Future[int]] = set()

    def __enter__(self) -> Pool:
        return self

    def submit(self, copy: Callable[[], int]) -> None:
        while len(self.pending) >= 2 * WORKERS:
            done, self.pending = wait(self.pending, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()
        self.pending.add(self.executor.submit(copy))

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        try:
            if error is None:
                for future in wait(self.pending).done:
                    future.result()
        finally:
            for future in self.pending:
                future.cancel()
            self.executor.shutdown(wait=True)
