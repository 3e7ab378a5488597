"""The outputs mover: after the attempt ended, copy the files of its directory that match
``spec.outputs`` to S3 (key: prefix + the file's path in the job's directory) or into a claim's
directory.

The cluster lists the directory and computes each file's SHA-256; every copy is checked
against that digest as it is read, whether it came through the cluster's tar stream
(``hooks.pods.movers.tarstream``) or, on a login node without tar, over SFTP. It never
replaces what is not this BatchJob's: an object is replaced only if its metadata names this
BatchJob (``OWNER``), a file only if it holds the same bytes already or its
``user.hpcbridge.owner`` attribute names this BatchJob; anything else is an error naming it.
A file in a claim is written under a temporary name, synced and renamed, so it is never partial
under its final name; a run again after a kill gives the same objects and files. It keeps the
source's permission bits, never wider than 0644 (``FILE_MODE``): a file only its owner may
read on the cluster stays so in the claim, and nothing becomes executable or set-id.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from minio import Minio

from hooks.core.spec.data import matches
from hooks.core.spec.layout import RESOLVE
from hooks.core.values.reasons import Reason
from hooks.core.values.text import has_control, shown
from hooks.deadline import Deadline
from hooks.pods.movers import claims, tarstream, workers
from hooks.pods.movers.errors import MoveError
from hooks.pods.movers.store import Verified, part_size, stored, upload
from hooks.ssh import channels
from hooks.ssh.client import Connection, Remote
from hooks.ssh.files import RemoteFiles

LIST = RESOLVE + r"""
cd -- "$d" || exit 3
find . -type f -printf '%m %s %P\0'"""
SMALL = 1024 * 1024


def collect(conn: Connection, files: RemoteFiles, s3: Minio | None,
            plan: list[dict[str, Any]], *, remote_dir: str, owner: str) -> tuple[int, int]:
    """Copy every output of ``plan``; the files and bytes in place. Through one tar stream
    where the login node has a tar (``streamed``), else file by file over SFTP."""
    sizes, modes = _listing(conn, remote_dir)
    chosen: list[tuple[dict[str, Any], str]] = []
    for item in plan:
        found = sorted(p for p in sizes if matches(item["pattern"], p))
        if not found and not item["optional"]:
            raise MoveError(Reason.OUTPUTS_FAILED, f"The output pattern {shown(item['pattern'])} "
                            "matched no file in the attempt's directory.", final=True)
        chosen += [(item, p) for p in found]
    _check_names({p for _, p in chosen})
    if not tarstream.available(conn):
        return len(chosen), _by_file(conn, files, s3, chosen, sizes, modes,
                                     remote_dir=remote_dir, owner=owner)
    first: dict[str, tuple[dict[str, Any], str]] = {}
    for job in chosen:
        first.setdefault(job[1], job)
    again = [job for job in chosen if first[job[1]] is not job]
    total = streamed(conn, s3, list(first.values()), sizes, modes, remote_dir=remote_dir,
                     owner=owner)
    return len(chosen), total + _by_file(conn, files, s3, again, sizes, modes,
                                         remote_dir=remote_dir, owner=owner)


def streamed(conn: Connection, s3: Minio | None, chosen: list[tuple[dict[str, Any], str]],
             sizes: dict[str, int], modes: dict[str, int], *, remote_dir: str,
             owner: str) -> int:
    """Copy the chosen outputs (each path once) from one archive the cluster's tar writes,
    small files first; the bytes copied. The cluster computes the
    digests on a channel of its own meanwhile. A small file is read whole and copied on a
    worker (``WORKERS`` at a time, a few queued), a large one as it arrives: into a claim as
    it is read (its digest is needed once its last byte is), to S3 once its digest is known
    (the object's metadata holds it)."""
    ordered = sorted(chosen, key=lambda job: (sizes[job[1]] > SMALL, job[1]))
    digests = tarstream.Digests(conn, remote_dir, list(dict.fromkeys(p for _, p in ordered)))
    names = [p for _, p in ordered]
    total = 0
    with workers.Pool() as pool, channels.reading(
            conn, ["sh", "-c", tarstream.CREATE, "hpcbridge-outputs", remote_dir],
            stdin=tarstream.listed(names), what="the outputs' tar") as chunks:
        for (item, path), (_, size, data) in zip(ordered, tarstream.members(chunks, names),
                                                 strict=True):
            mode = modes[path] & claims.FILE_MODE
            if size <= SMALL:
                body = b"".join(data)
                pool.submit(functools.partial(_copy_from, s3, item, path, size, mode,
                                              iter((body,)), digests.of, owner))
            else:
                _copy_from(s3, item, path, size, mode, data, digests.of, owner)
                for _ in data:  # what a destination that held it already left unread
                    pass
            total += size
    digests.all()
    return total


def _copy_from(s3: Minio | None, item: dict[str, Any], path: str, size: int, mode: int,
               chunks: Iterator[bytes | memoryview], digest: Callable[[str], str],
               owner: str) -> int:
    """Copy one output read from ``chunks`` to its destination; its size."""
    reader = Verified(lambda: chunks, size, lambda: digest(path), path,
                      part=part_size(size) if "s3" in item else 0)
    _deliver(s3, item, path, reader, mode, owner)
    return size


def _by_file(conn: Connection, files: RemoteFiles, s3: Minio | None,
             chosen: list[tuple[dict[str, Any], str]], sizes: dict[str, int],
             modes: dict[str, int], *, remote_dir: str, owner: str) -> int:
    """Copy the chosen outputs file by file over SFTP: files up to ``SMALL`` bytes several at
    a time (``hooks.pods.movers.workers``), then the larger ones one at a time, while the
    cluster computes the digests, small files' first (``tarstream.Digests``): into a claim as
    the cluster still computes them, to S3 once they are known."""
    small = [(item, p) for item, p in chosen if sizes[p] <= SMALL]
    large = [(item, p) for item, p in chosen if sizes[p] > SMALL]
    digests = tarstream.Digests(conn, remote_dir, sorted({p for _, p in small})
                                + sorted({p for _, p in large} - {p for _, p in small}))

    def copy(on: RemoteFiles, job: tuple[dict[str, Any], str]) -> int:
        path = job[1]
        return _copy(on, s3, *job, size=sizes[path], mode=modes[path], remote_dir=remote_dir,
                     owner=owner, digest=functools.partial(digests.of, path))

    total = workers.each(conn, small, copy)
    return total + sum(copy(files, job) for job in large)


def _copy(files: RemoteFiles, s3: Minio | None, item: dict[str, Any], path: str, *, size: int,
          mode: int, digest: Callable[[], str], remote_dir: str, owner: str) -> int:
    """Copy one output (``mode``: the source's permission bits); its size."""
    reader = Verified(functools.partial(files.read, f"{remote_dir}/{path}", size), size, digest,
                      path, part=part_size(size) if "s3" in item else 0)
    _deliver(s3, item, path, reader, mode & claims.FILE_MODE, owner)
    return size


def _deliver(s3: Minio | None, item: dict[str, Any], path: str, reader: Verified, mode: int,
             owner: str) -> None:
    """Write the reader's output where ``item`` says: an object, or a file of ``mode`` in a
    claim."""
    try:
        if "s3" in item:
            assert s3 is not None
            _to_s3(s3, item["s3"]["bucket"], item["s3"]["prefix"] + path, reader, owner)
        else:
            claims.write(Path(item["dir"]), path, reader, owner, mode)
    except MoveError as err:
        if err.reason is Reason.INPUT_NOT_FOUND:  # a missing bucket, for an output
            raise MoveError(Reason.OUTPUTS_FAILED, err.message) from err
        raise
    finally:
        reader.close()


def _listing(conn: Remote, remote_dir: str) -> tuple[dict[str, int], dict[str, int]]:
    """The attempt's files (but the hooks' own: names starting with '.' or 'hpcbridge' at its
    top) by path: their sizes, and their permission bits."""
    result = conn.run(["sh", "-c", LIST, "hpcbridge-outputs", remote_dir],
                      deadline=Deadline.after(300))
    if result.exit_status != 0:
        raise MoveError(Reason.NONE, "The attempt's directory could not be listed "
                                     f"(exit {result.exit_status}).")
    sizes, modes = {}, {}
    for entry in result.stdout.split(b"\0"):
        mode, _, rest = entry.decode(errors="surrogateescape").partition(" ")
        size, _, name = rest.partition(" ")
        if not name or name.partition("/")[0].startswith((".", "hpcbridge")):
            continue
        sizes[name], modes[name] = int(size), int(mode, 8)
    return sizes, modes


def _check_names(paths: set[str]) -> None:
    for path in sorted(paths):
        if has_control(path) or "\\" in path:
            raise MoveError(Reason.OUTPUTS_FAILED, f"The output {shown(path)} has a name with "
                            "control characters or a backslash; it is not copied.", final=True)


def _to_s3(s3: Minio, bucket: str, key: str, reader: Verified, owner: str) -> None:
    there = stored(s3, bucket, key)
    if there is not None and there.owner != owner:
        raise MoveError(Reason.OUTPUTS_FAILED, f"s3://{bucket}/{key} exists and is not an "
                        "output of this BatchJob; it is left as it is.", final=True)
    if there is not None and there.sha256 == reader.expected and there.size == reader.size:
        return
    upload(s3, bucket, key, reader, owner)
