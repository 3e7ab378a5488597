"""Bulk bytes through one exec channel, for the mover Pods: a remote program's stdout read as it
arrives (``reading``), or its stdin written as the mover makes it (``writing``).

A ``Connection.run`` command gathers its output and dies with its deadline; a transfer of
hundreds of GiB has no deadline it could know, so these have none: a channel on which nothing
moves for ``IDLE`` seconds is given up instead. The channel's window is ``WINDOW``, its packets
paramiko's default size (larger packets were slower with AES-GCM on paramiko 5.1, as measured
for bench/results.md). The remote program's stderr is kept (its last ``MAX_STDERR`` bytes) for
the sentence of a failure, read as it comes so that it never stops the stream. What is written
goes out packet by packet from a view of the caller's bytes: paramiko's ``sendall`` copies the
rest of its bytes after every packet, some 16 MiB of copying for each MiB sent.

Every failure is an ``hooks.ssh.errors.SSHError`` with one sentence.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterator, Sequence

import paramiko

from hooks.ssh import errors
from hooks.ssh.client import MAX_STDERR, Connection

WINDOW = 8 * 1024 * 1024
CHUNK = WINDOW
IDLE = 300.0
"""Seconds without a byte either way before a channel is given up."""


class Channel:
    """One exec channel of a remote program, open for the length of a ``with``."""

    def __init__(self, conn: Connection, argv: Sequence[str], what: str) -> None:
        self.host, self.what = conn.target.host, what
        self.err = bytearray()
        try:
            self.channel = conn.transport.open_session(window_size=WINDOW)
            self.channel.settimeout(IDLE)
            self.channel.exec_command(shlex.join(argv))
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise self.failed(err) from err

    def failed(self, err: BaseException | str) -> errors.SSHError:
        if isinstance(err, TimeoutError):
            return errors.CommandTimeout(self.host, f"{self.what} on {self.host} moved no byte "
                                                    f"for {IDLE:.0f} s")
        return errors.ClusterUnreachable(self.host, f"{self.what} on {self.host} failed: {err}")

    def drain_stderr(self) -> None:
        while self.channel.recv_stderr_ready():
            self.err += self.channel.recv_stderr(65536)
            del self.err[:-MAX_STDERR]

    def finish(self) -> None:
        """Wait for the program's end; a failure names its last line of stderr."""
        try:
            status = self.channel.recv_exit_status()
            while chunk := self.channel.recv_stderr(65536):
                self.err += chunk
                del self.err[:-MAX_STDERR]
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise self.failed(err) from err
        if status != 0:
            lines = self.err.decode(errors="replace").strip().splitlines()
            raise self.failed(f"exit {status}" + (f": {lines[-1][:300]}" if lines else ""))

    def close(self) -> None:
        with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
            self.channel.close()


@contextlib.contextmanager
def reading(conn: Connection, argv: Sequence[str], *, stdin: bytes = b"",
            what: str) -> Iterator[Iterator[bytes]]:
    """Run ``argv`` with ``stdin``; its stdout as chunks of up to ``CHUNK`` bytes. The program
    must exit 0 by the end of the ``with`` (``what`` names it in the sentence if not)."""
    opened = Channel(conn, argv, what)

    def chunks() -> Iterator[bytes]:
        try:
            while True:
                data = opened.channel.recv(CHUNK)
                opened.drain_stderr()
                if not data:
                    return
                yield data
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise opened.failed(err) from err

    try:
        try:
            if stdin:
                opened.channel.sendall(stdin)
            opened.channel.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise opened.failed(err) from err
        yield chunks()
        opened.finish()
    finally:
        opened.close()


@contextlib.contextmanager
def writing(conn: Connection, argv: Sequence[str], *,
            what: str) -> Iterator[Callable[[bytes], None]]:
    """Run ``argv``; a call that sends bytes to its stdin. Its stdin ends with the ``with``, and
    the program must then exit 0."""
    opened = Channel(conn, argv, what)

    def send(data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:  # paramiko's sendall copies the rest of its bytes after each packet
                view = view[opened.channel.send(view):]  # type: ignore[arg-type]  # any bytes-like
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise opened.failed(err) from err
        opened.drain_stderr()

    try:
        yield send
        try:
            opened.channel.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise opened.failed(err) from err
        opened.finish()
    finally:
        opened.close()
