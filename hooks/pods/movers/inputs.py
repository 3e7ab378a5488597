"""The inputs mover: fetch the attempt's ``s3`` and ``persistentVolumeClaim`` inputs into its
staging directory on the cluster: as one archive the cluster's tar unpacks there, where the
login node has a tar (``hooks.pods.movers.tarstream``), else file by file over SFTP, each
written under a temporary name and renamed. Every file's SHA-256 is computed as it is sent and
checked against what the cluster computes of the file it wrote. ``.staged`` (``FILES BYTES``)
is written last, and the guarded submission moves the staged files into the attempt's
directory (keeping ``.staged`` there as ``.staged-in``), so a run again after a kill copies
afresh and a submission never sees half-staged inputs.

Names from the store are hostile: a key below a prefix that would land outside the input's
path (an empty, ``.`` or ``..`` component, a control character) is refused, never followed.
A claim's symbolic links are refused too: they could point anywhere in the Pod.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from minio import Minio

from hooks.core.values.reasons import Reason
from hooks.core.values.text import has_control, shown
from hooks.pods.movers import tarstream
from hooks.pods.movers.errors import MoveError
from hooks.pods.movers.store import download, objects
from hooks.pods.movers.workers import WORKERS
from hooks.ssh import channels
from hooks.ssh.client import Connection
from hooks.ssh.files import RemoteFiles

MARK = ".staged"
MOVED = ".staged-in"
CHUNK = 1024 * 1024
MAX_FILES = 100_000
SMALL = 1024 * 1024
"""Objects up to this size are fetched ahead, several at a time."""


def stage(conn: Connection, files: RemoteFiles, s3: Minio | None,
          plan: list[dict[str, Any]], *, staging: str, remote_dir: str) -> tuple[int, int]:
    """Stage every input of ``plan``; the files and bytes staged."""
    for done in (f"{remote_dir}/{MOVED}", f"{staging}/{MARK}"):
        if files.size(done) is not None:
            return _counts(files, done)
    if tarstream.available(conn):
        count, total = streamed(conn, s3, plan, staging)
    else:
        count, total = _by_file(files, s3, plan, staging)
    files.write(f"{staging}/{MARK}", [f"{count} {total}\n".encode()], f"{staging}/{MARK}.tmp")
    return count, total


def streamed(conn: Connection, s3: Minio | None, plan: list[dict[str, Any]],
             staging: str) -> tuple[int, int]:
    """Send every input of ``plan`` as one archive that the cluster's tar unpacks into
    ``staging`` (files of mode 0600), then check each file the cluster wrote against the
    SHA-256 of what was sent; the files and bytes staged."""
    staged: list[tuple[str, str, int]] = []
    current: list[tuple[Any, Any, str]] = []

    def members() -> Iterator[tarstream.Member]:
        for item in plan:
            for path, size, chunks, check in _sources(item, s3):
                if len(staged) >= MAX_FILES:
                    raise MoveError(Reason.NONE, f"spec.inputs come to more than {MAX_FILES} "
                                                 "files.")
                md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
                current[:] = [(md5, sha, check)]
                hashed = _hashed(_hashed(chunks, md5), sha) if check else _hashed(chunks, sha)
                yield tarstream.Member(path, size, 0o600, hashed)

    def sent(member: tarstream.Member, size: int) -> None:
        ((md5, sha, check),) = current
        if check and md5.hexdigest() != check:
            raise MoveError(Reason.NONE, f"{member.name}: not the bytes the store names; "
                                         "retried.")
        staged.append((member.name, sha.hexdigest(), size))

    with channels.writing(conn, ["sh", "-c", tarstream.EXTRACT, "hpcbridge-inputs", staging],
                          what="the inputs' tar") as send:
        tarstream.archive(send, members(), sent)
    written = tarstream.Digests(conn, staging, [path for path, _, _ in staged]).all()
    for path, digest, _ in staged:
        if written[path] != digest:
            raise MoveError(Reason.NONE, f"{path} on the cluster is not the bytes sent; "
                                         "retried.")
    return len(staged), sum(size for _, _, size in staged)


def _by_file(files: RemoteFiles, s3: Minio | None, plan: list[dict[str, Any]],
             staging: str) -> tuple[int, int]:
    """Write every input of ``plan`` into ``staging`` over SFTP, one file at a time."""
    count = total = 0
    for item in plan:
        for path, size, chunks, check in _sources(item, s3):
            target = f"{staging}/{path}"
            files.makedirs(target.rpartition("/")[0])
            digest = hashlib.md5(usedforsecurity=False)
            written = files.write(target, _hashed(chunks, digest), _temporary(target))
            if written != size or (check and digest.hexdigest() != check):
                raise MoveError(Reason.NONE, f"{path}: {written} bytes arrived of {size}, or "
                                             "not the bytes the store names; retried.")
            count, total = count + 1, total + written
            if count > MAX_FILES:
                raise MoveError(Reason.NONE, f"spec.inputs come to more than {MAX_FILES} files.")
    return count, total


def _sources(item: dict[str, Any], s3: Minio | None) -> Iterator[
        tuple[str, int, Iterator[bytes], str]]:
    """(path in the job's directory, size, bytes, the MD5 to expect or "") of one input."""
    path = item["path"]
    if "s3" in item:
        assert s3 is not None
        bucket, key, prefix = item["s3"]["bucket"], item["s3"]["key"], item["s3"]["prefix"]
        if key:
            size, etag, chunks = download(s3, bucket, key)
            yield (path + key.rpartition("/")[2] if path.endswith("/") else path), size, \
                chunks, _md5(etag)
            return
        found = False
        for relative, size, chunks, md5 in _fetched(s3, bucket, prefix):
            found = True
            yield path + relative, size, chunks, md5
        if not found:
            raise MoveError(Reason.INPUT_NOT_FOUND, f"No object was found under "
                                                    f"s3://{bucket}/{prefix}.")
        return
    yield from _claim(Path(item["dir"]), path)


def _fetched(s3: Minio, bucket: str, prefix: str) -> Iterator[
        tuple[str, int, Iterator[bytes], str]]:
    """The objects under ``prefix`` in the order listed: (path below the prefix, size, bytes,
    the MD5 to expect or ""). Objects up to ``SMALL`` bytes are fetched whole, ``WORKERS`` at a
    time and at most ``2 * WORKERS`` ahead (a small object's cost is its request's round
    trip); a larger one is streamed when its turn comes."""
    ahead: deque[tuple[str, str, Future[tuple[int, str, bytes]] | None]] = deque()

    def turn() -> tuple[str, int, Iterator[bytes], str]:
        relative, key, fetched = ahead.popleft()
        if fetched is None:
            size, etag, chunks = download(s3, bucket, key)
            return relative, size, chunks, _md5(etag)
        size, etag, data = fetched.result()
        return relative, size, iter((data,)), _md5(etag)

    with ThreadPoolExecutor(WORKERS, thread_name_prefix="fetch") as pool:
        try:
            for obj in objects(s3, bucket, prefix):
                if obj.is_dir or obj.object_name.endswith("/"):
                    continue
                key = obj.object_name
                relative = _relative(key[len(prefix):], f"s3://{bucket}/{key}")
                small = (obj.size or 0) <= SMALL
                ahead.append((relative, key, pool.submit(_whole, s3, bucket, key) if small
                              else None))
                while len(ahead) > 2 * WORKERS:
                    yield turn()
            while ahead:
                yield turn()
        finally:
            for _, _, fetched in ahead:
                if fetched is not None:
                    fetched.cancel()


def _whole(s3: Minio, bucket: str, key: str) -> tuple[int, str, bytes]:
    size, etag, chunks = download(s3, bucket, key)
    return size, etag, b"".join(chunks)


def _claim(source: Path, path: str) -> Iterator[tuple[str, int, Iterator[bytes], str]]:
    """A claim's file or directory, its symbolic links refused."""
    try:
        mode = os.lstat(source).st_mode
    except FileNotFoundError:
        raise MoveError(Reason.INPUT_NOT_FOUND, f"{_shown_claim(source)} was not found in the "
                                                "claim.") from None
    if stat.S_ISREG(mode):
        name = path + source.name if path.endswith("/") else path
        yield name, os.lstat(source).st_size, _read(source), ""
        return
    if not stat.S_ISDIR(mode):
        raise MoveError(Reason.NONE, f"{_shown_claim(source)} is not a file or directory.")
    base = path if path.endswith("/") else path + "/"
    for top, dirs, names in os.walk(source, followlinks=False):
        dirs.sort()
        for name in [*sorted(names), *(d for d in dirs if os.path.islink(Path(top, d)))]:
            full = Path(top, name)
            info = os.lstat(full)
            relative = _relative(str(full.relative_to(source)), _shown_claim(full))
            if not stat.S_ISREG(info.st_mode):
                raise MoveError(Reason.NONE, f"{_shown_claim(full)} is a symbolic link or "
                                             "special file; only files and directories are "
                                             "copied.")
            yield base + relative, info.st_size, _read(full), ""


def _read(path: Path) -> Iterator[bytes]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def _relative(name: str, where: str) -> str:
    parts = name.split("/")
    if (not name or has_control(name) or any(p in ("", ".", "..") for p in parts)
            or any(len(p.encode()) > 255 for p in parts) or len(name.encode()) > 1024):
        raise MoveError(Reason.NONE, f"{shown(where)} would land outside the input's path "
                                     "(an empty, '.' or '..' component, a control character "
                                     "or a name too long); it is refused.")
    return name


def _md5(etag: str) -> str:
    """The MD5 an ETag names: only a single-part upload's ETag is one."""
    return etag.lower() if len(etag) == 32 and all(c in "0123456789abcdefABCDEF"
                                                   for c in etag) else ""


def _hashed(chunks: Iterator[bytes], digest: Any) -> Iterator[bytes]:
    for chunk in chunks:
        digest.update(chunk)
        yield chunk


def _temporary(target: str) -> str:
    folder, _, name = target.rpartition("/")
    return f"{folder}/.{name}.part"


def _counts(files: RemoteFiles, path: str) -> tuple[int, int]:
    text = b"".join(files.read(path, files.size(path) or 0)).decode(errors="replace").split()
    numbers = [int(t) for t in text[:2] if t.isdigit()]
    return (numbers[0], numbers[1]) if len(numbers) == 2 else (0, 0)


def _shown_claim(path: Path) -> str:
    parts = path.parts
    return shown("/".join(parts[parts.index("claims") + 2:]) if "claims" in parts else str(path))
