"""Files on a cluster over SFTP, for the mover Pods: streamed in bounded windows, written under
a temporary name and renamed, so that a file is never partial under its final name.

Paths are absolute or relative to the login user's home (SFTP starts there). Every failure is
an ``hooks.ssh.errors.SSHError`` with one sentence.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Iterator

import paramiko

from hooks.ssh import errors
from hooks.ssh.client import Connection

CHUNK = 256 * 1024
WINDOW = 32
"""Reads in flight at once: a window of ``WINDOW * CHUNK`` bytes (8 MiB) is the most a read
holds in memory, whatever the file's size."""


class RemoteFiles:
    """An SFTP session on an open connection."""

    def __init__(self, conn: Connection) -> None:
        self.host = conn.target.host
        try:
            sftp = paramiko.SFTPClient.from_transport(conn.transport)
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
        """The first ``size`` bytes of a file, in order, ``WINDOW`` reads in flight at most."""
        try:
            with self.sftp.open(path, "rb") as remote:
                offset = 0
                while offset < size:
                    span = min(size - offset, WINDOW * CHUNK)
                    parts = [(at, min(CHUNK, offset + span - at))
                             for at in range(offset, offset + span, CHUNK)]
                    yield from remote.readv(parts)
                    offset += span
        except (OSError, paramiko.SSHException, EOFError) as err:
            raise self._failed("read", path, err) from err

    def _failed(self, what: str, path: str, err: BaseException) -> errors.SSHError:
        return errors.ClusterUnreachable(self.host, f"SFTP {what} of {path} on {self.host} "
                                                    f"failed: {err}")
