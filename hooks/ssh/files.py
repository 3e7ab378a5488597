"""Files on a cluster over SFTP, for the mover Pods: streamed with a bounded number of reads in
flight, written under a temporary name and renamed, so that a file is never partial under its
final name.

Reads are pipelined here rather than with paramiko's ``readv``/``prefetch``: their prefetch
thread races the responses (a window whose requests are all answered before the thread has
recorded the last one counts as done), after which the rest of the file is read one 32 KiB
request at a time, and the answers still arriving pile up in the file object until it is
closed. A large file then held about a third of its size in memory and crawled. ``read`` keeps
``DEPTH`` requests of ``REQUEST`` bytes in flight, on SFTPClient's own request and response
calls, and hands each answer on in order as it arrives.

Paths are absolute or relative to the login user's home (SFTP starts there). Every failure is
an ``hooks.ssh.errors.SSHError`` with one sentence.
"""

from __future__ import annotations

import stat
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, cast

import paramiko
from paramiko.message import Message
from paramiko.sftp import CMD_DATA, CMD_READ, CMD_STATUS, SFTP_EOF, int64

from hooks.ssh import errors
from hooks.ssh.client import Connection

REQUEST = 255 * 1024
"""Bytes asked for by one read request: OpenSSH's sftp-server answers up to 255 KiB. A server
may answer fewer; the rest is asked again, and later requests ask for no more than it answered."""
DEPTH = 16
"""Read requests in flight at once: ``DEPTH * REQUEST`` bytes (about 4 MiB) are the most a read
holds in memory, whatever the file's size."""
WINDOW = 8 * 1024 * 1024
PACKET = 256 * 1024
"""The SFTP channel's window and largest packet: room for every answer in flight, in packets
eight times paramiko's default (the cost of a transfer is mostly per packet)."""


class RemoteFiles:
    """An SFTP session on an open connection."""

    def __init__(self, conn: Connection) -> None:
        self.host = conn.target.host
        try:
            sftp = paramiko.SFTPClient.from_transport(conn.transport, window_size=WINDOW,
                                                      max_packet_size=PACKET)
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise self._failed("open", "a session", err) from err
        if sftp is None:
            raise errors.ClusterUnreachable(self.host, f"{self.host} refused an SFTP session")
        self.sftp: paramiko.SFTPClient = sftp

    def close(self) -> None:
        self.sftp.close()

    def size(self, path: str) -> int | None:
        """The size of a regular file, or None when there is none at ``path``."""
        try:
            found = self.sftp.lstat(path)
        except FileNotFoundError:
            return None
        except (OSError, paramiko.SSHException, EOFError) as err:
            raise self._failed("stat", path, err) from err
        if found.st_mode is None or not stat.S_ISREG(found.st_mode):
            return None
        return found.st_size or 0

    def exists(self, path: str) -> bool:
        try:
            self.sftp.lstat(path)
        except FileNotFoundError:
            return False
        except (OSError, paramiko.SSHException, EOFError) as err:
            raise self._failed("stat", path, err) from err
        return True

    def makedirs(self, path: str) -> None:
        """``mkdir -p``, mode 0700."""
        done = ""
        for part in path.split("/"):
            done = f"{done}/{part}" if done or path.startswith("/") else part
            if not part or self.exists(done):
                continue
            try:
                self.sftp.mkdir(done, 0o700)
            except (OSError, paramiko.SSHException, EOFError) as err:
                if not self.exists(done):
                    raise self._failed("mkdir", done, err) from err

    def write(self, path: str, chunks: Iterable[bytes], temporary: str) -> int:
        """Write ``chunks`` to ``temporary`` (mode 0600), then rename it to ``path``; the bytes
        written."""
        written = 0
        try:
            with self.sftp.open(temporary, "wb") as remote:
                remote.chmod(0o600)
                remote.set_pipelined(True)
                for chunk in chunks:
                    remote.write(chunk)
                    written += len(chunk)
            self.sftp.posix_rename(temporary, path)
        except (OSError, paramiko.SSHException, EOFError) as err:
            raise self._failed("write", path, err) from err
        return written

    def read(self, path: str, size: int) -> Iterator[bytes]:
        """The first ``size`` bytes of a file, in order, ``DEPTH`` requests in flight at most;
        fewer bytes when the file is shorter."""
        try:
            with self.sftp.open(path, "rb") as remote:
                yield from _pipelined(cast(_Requests, self.sftp), cast(bytes, remote.handle),
                                      size)
        except (OSError, paramiko.SSHException, EOFError) as err:
            raise self._failed("read", path, err) from err

    def _failed(self, what: str, path: str, err: BaseException) -> errors.SSHError:
        return errors.ClusterUnreachable(self.host, f"SFTP {what} of {path} on {self.host} "
                                                    f"failed: {err}")


class _Requests(Protocol):
    """SFTPClient's own calls, under its read-ahead: send a request for an object, read one
    answer and hand it to the object its request was made for."""

    def _async_request(self, fileobj: Any, kind: int, *args: Any) -> int: ...

    def _read_response(self, waitfor: int | None = None) -> tuple[Any, Any]: ...


class _Answers:
    """The answers to one file's read requests, by request number, as SFTPClient hands them to
    the object a request was made for."""

    def __init__(self) -> None:
        self.arrived: dict[int, tuple[int, Message]] = {}

    def _async_response(self, kind: int, msg: Message, num: int) -> None:
        self.arrived[num] = (kind, msg)


def _pipelined(sftp: _Requests, handle: bytes, size: int) -> Iterator[bytes]:
    answers, asking = _Answers(), REQUEST
    flight: deque[tuple[int, int, int]] = deque()
    offset = 0

    def ask(at: int, length: int) -> tuple[int, int, int]:
        return (sftp._async_request(answers, CMD_READ, handle, int64(at), int(length)), at,
                length)

    while offset < size or flight:
        while offset < size and len(flight) < DEPTH:
            flight.append(ask(offset, min(asking, size - offset)))
            offset += flight[-1][2]
        num, at, length = flight.popleft()
        while num not in answers.arrived:
            sftp._read_response()
        kind, msg = answers.arrived.pop(num)
        if kind == CMD_STATUS:
            if msg.get_int() == SFTP_EOF:
                return
            raise OSError(f"the server answered {msg.get_text()!r}")
        if kind != CMD_DATA:
            raise OSError(f"the server answered message type {kind} to a read")
        data = msg.get_binary()
        if not data:
            return
        if len(data) < length:
            asking = max(len(data), 1024)
            flight.appendleft(ask(at + len(data), length - len(data)))
        yield data
