"""The object store, as the movers use it: minio's S3 client, with its errors sorted into what
the BatchJob reports (``InputNotFound``, ``StorageAccessDenied``, or trouble to retry), and
uploads that are verified and never replace what is not this BatchJob's.

minio rather than boto3: the image carries the S3 client for the movers alone, and minio is
a small pure-Python client on urllib3 (about 1 MB, with its dependencies some 20 MB) where
boto3's botocore is about 100 MB; both stream multipart uploads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

import urllib3
from minio import Minio
from minio.error import MinioException, S3Error

from hooks.core.values.reasons import Reason
from hooks.pods.movers import peer
from hooks.pods.movers.errors import MoveError as MoveError  # re-exported
from hooks.pods.movers.workers import WORKERS

MIB = 1024 * 1024
PART_SIZE = 8 * MIB
MAX_PARTS = 10_000
UPLOADS = 2
"""Uploads above ``PART_SIZE`` are multipart: ``UPLOADS`` parts are sent at a time while the
next one is read (so the SFTP reads go on while the store answers), three parts in memory at
most; parts are larger only for objects above ``MAX_PARTS * PART_SIZE`` (78 GiB), S3's most
parts in one object."""
OWNER = "hpcbridge-owner"
SHA256 = "hpcbridge-sha256"
"""The user metadata of every object a mover writes: the BatchJob's uid and the content's
digest (a run again skips an object that already holds the same bytes)."""
DENIED = {"AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidToken",
          "ExpiredToken", "AllAccessDisabled", "InvalidSecurity"}
NOT_FOUND = {"NoSuchKey", "NoSuchBucket", "NoSuchObject", "ResourceNotFound"}


@dataclass(frozen=True)
class Stored:
    size: int
    owner: str
    sha256: str


def client(endpoint: str, region: str, secret_dir: Path, *, allowed: bool = False) -> Minio:
    """A client for ``endpoint`` with the keys of the mounted S3 Secret. Unless the endpoint is
    ``allowed`` (on an allow-list, the hooks say), each of its connections must lead to a
    public address (``hooks.pods.movers.peer``). A redirect is never followed (S3 answers none
    to a working request): the client talks to the endpoint it was given, and to no other."""
    def value(key: str) -> str | None:
        path = secret_dir / key
        return path.read_text().strip() if path.is_file() else None

    access, secret = value("AWS_ACCESS_KEY_ID"), value("AWS_SECRET_ACCESS_KEY")
    if not access or not secret:
        raise MoveError(Reason.STORAGE_ACCESS_DENIED, "The S3 Secret of spec.storage.s3 needs "
                        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.")
    scheme, _, host = endpoint.partition("://")
    http = urllib3.PoolManager(
        maxsize=WORKERS + 1, timeout=urllib3.Timeout(connect=10, read=120),
        retries=urllib3.Retry(total=3, backoff_factor=0.5, status_forcelist=[500, 502, 503, 504],
                              redirect=False))
    if not allowed:
        http.pool_classes_by_scheme = peer.POOLS
    return Minio(host.rstrip("/"), access_key=access, secret_key=secret,
                 session_token=value("AWS_SESSION_TOKEN"), secure=scheme == "https",
                 region=region or "us-east-1", http_client=http)


def failure(err: Exception, what: str) -> MoveError:
    """``err`` of an operation on ``what`` (``s3://bucket/key``) as the BatchJob reports it."""
    if isinstance(err, S3Error):
        status = err.response.status if err.response is not None else 0
        if err.code in DENIED or status == 403:
            return MoveError(Reason.STORAGE_ACCESS_DENIED,
                             f"The object store refused the keys of spec.storage.s3 for {what} "
                             f"({err.code}).")
        if err.code in NOT_FOUND or status == 404:
            return MoveError(Reason.INPUT_NOT_FOUND, f"{what} was not found ({err.code}).")
        return MoveError(Reason.NONE, f"The object store answered {err.code} for {what}.")
    return MoveError(Reason.NONE, f"The object store could not be reached for {what}: "
                                  f"{type(err).__name__}.")


def stored(s3: Minio, bucket: str, key: str) -> Stored | None:
    """The object at ``key`` as a mover wrote it (owner and digest from its metadata), or None
    when there is none."""
    try:
        found = s3.stat_object(bucket, key)
    except S3Error as err:
        if err.code in ("NoSuchKey", "NoSuchObject") or (
                err.response is not None and err.response.status == 404
                and err.code != "NoSuchBucket"):
            return None
        raise failure(err, f"s3://{bucket}/{key}") from err
    except (MinioException, urllib3.exceptions.HTTPError, OSError) as err:
        raise failure(err, f"s3://{bucket}/{key}") from err
    meta = {k.lower(): v for k, v in (found.metadata or {}).items()}
    return Stored(found.size or 0, meta.get(f"x-amz-meta-{OWNER}", ""),
                  meta.get(f"x-amz-meta-{SHA256}", ""))


class Verified:
    """A file-like reader over ``chunks`` of ``size`` bytes that checks their SHA-256 against
    ``sha256`` (what the cluster computed) as the last byte is read and, given a ``part`` size,
    keeps each part's MD5 for the ETag the store must answer. ``sha256`` may be a call that
    waits for it, made when it is first needed.

    A read of ``n`` bytes holds at most the pieces that make it up and their join, about
    ``2 * n``: the pieces are joined once, only the last one is cut, and the digests read the
    bytes in place."""

    def __init__(self, chunks: Callable[[], Iterator[bytes | memoryview]], size: int,
                 sha256: str | Callable[[], str], where: str, *, part: int = 0) -> None:
        self.opened: Iterator[bytes | memoryview] | None = None
        self.open, self.size, self.where = chunks, size, where
        self.digest = sha256
        self.sha = hashlib.sha256()
        self.part_size = part
        self.parts: list[bytes] = []
        self.part = hashlib.md5(usedforsecurity=False)
        self.read_bytes = 0
        self.pending: bytes | memoryview = b""

    @property
    def expected(self) -> str:
        """The SHA-256 the cluster computed (given as a call: it may still be computing it)."""
        if callable(self.digest):
            self.digest = self.digest()
        return self.digest

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = self.size - self.read_bytes
        if self.opened is None:
            self.opened = self.open()
        pieces: list[bytes | memoryview] = [self.pending] if self.pending else []
        have = len(self.pending)
        while have < n and self.read_bytes + have < self.size:
            chunk = next(self.opened, b"") or self._short()
            pieces.append(chunk)
            have += len(chunk)
        self.pending = b""
        if have > n:
            last, cut = pieces[-1], len(pieces[-1]) - (have - n)
            pieces[-1], self.pending = last[:cut], last[cut:]
        data = bytes(pieces[0]) if len(pieces) == 1 else b"".join(pieces)
        pieces.clear()
        self._digest(memoryview(data))
        if self.read_bytes == self.size and self.sha.hexdigest() != self.expected:
            raise MoveError(Reason.NONE, f"{self.where} changed while it was read: its "
                                         "SHA-256 is not what the cluster computed.")
        return data

    def each(self) -> Iterator[bytes | memoryview]:
        """The bytes as they arrive, checked as ``read`` checks them (a file written chunk by
        chunk needs no joined reads)."""
        if self.opened is None:
            self.opened = self.open()
        while self.read_bytes < self.size:
            chunk = next(self.opened, b"") or self._short()
            chunk = chunk[:self.size - self.read_bytes]
            self._digest(memoryview(chunk))
            yield chunk
        if self.sha.hexdigest() != self.expected:
            raise MoveError(Reason.NONE, f"{self.where} changed while it was read: its "
                                         "SHA-256 is not what the cluster computed.")

    def _digest(self, view: memoryview) -> None:
        self.sha.update(view)
        if not self.part_size:
            self.read_bytes += len(view)
            return
        while view:
            room = self.part_size - self.read_bytes % self.part_size
            self.part.update(view[:room])
            self.read_bytes += len(view[:room])
            view = view[room:]
            if self.read_bytes % self.part_size == 0 or self.read_bytes == self.size:
                self.parts.append(self.part.digest())
                self.part = hashlib.md5(usedforsecurity=False)

    def close(self) -> None:
        """Stop reading (the source's file is closed)."""
        if isinstance(self.opened, Generator):
            self.opened.close()

    def etag(self) -> str:
        if len(self.parts) <= 1:
            return self.parts[0].hex() if self.parts else hashlib.md5(
                b"", usedforsecurity=False).hexdigest()
        return f"{hashlib.md5(b''.join(self.parts), usedforsecurity=False).hexdigest()}-" \
               f"{len(self.parts)}"

    def _short(self) -> bytes:
        raise MoveError(Reason.NONE, f"{self.where} ended before its {self.size} bytes.")


def part_size(size: int) -> int:
    """The part size of an upload of ``size`` bytes: ``PART_SIZE``, or for an object above
    ``MAX_PARTS`` of them, the least number of MiB that keeps within S3's limit."""
    return max(PART_SIZE, -(-size // (MAX_PARTS * MIB)) * MIB)


def upload(s3: Minio, bucket: str, key: str, reader: Verified, owner: str) -> None:
    """Replace the object at ``key`` with the reader's bytes (in parts of ``reader.part_size``),
    verified on the way (SHA-256) and after (the ETag the store answered)."""
    where = f"s3://{bucket}/{key}"
    try:
        result = s3.put_object(bucket, key, cast(BinaryIO, reader), reader.size,
                               part_size=reader.part_size, num_parallel_uploads=UPLOADS,
                               metadata={OWNER: owner, SHA256: reader.expected})
    except MoveError:
        raise
    except (MinioException, urllib3.exceptions.HTTPError, OSError, ValueError) as err:
        raise failure(err, where) from err
    if (result.etag or "").strip('"') != reader.etag():
        raise MoveError(Reason.NONE, f"{where}: the store's ETag {result.etag} is not the "
                                     "digest of the bytes sent.")


def objects(s3: Minio, bucket: str, prefix: str) -> Iterator[Any]:
    """Every object under ``prefix``."""
    try:
        yield from s3.list_objects(bucket, prefix=prefix, recursive=True)
    except (MinioException, urllib3.exceptions.HTTPError, OSError) as err:
        raise failure(err, f"s3://{bucket}/{prefix}") from err


def download(s3: Minio, bucket: str, key: str) -> tuple[int, str, Iterator[bytes]]:
    """An object's size, its ETag and its bytes as they arrive."""
    where = f"s3://{bucket}/{key}"
    try:
        response = s3.get_object(bucket, key)
    except (MinioException, urllib3.exceptions.HTTPError, OSError) as err:
        raise failure(err, where) from err
    size = int(response.headers.get("Content-Length", "0"))

    def chunks() -> Iterator[bytes]:
        try:
            yield from response.stream(256 * 1024)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise failure(err, where) from err
        finally:
            response.close()
            response.release_conn()

    return size, response.headers.get("ETag", "").strip('"'), chunks()
