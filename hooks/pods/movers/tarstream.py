"""Many files through one channel: the cluster's ``tar`` writes them to the mover's channel, or
reads them from it, and the cluster's digests of them arrive on a second channel as each is
computed. Per-file round trips (an SFTP open, stat and close each) are what make small files
slow, and paramiko's SFTP requests what makes large ones so; a tar stream has neither.

The mover reads the archive itself, member by member, and takes from it only regular files
of exactly the names it asked for, in the order it asked (``members``); what the cluster's tar
sends besides (a link, a device, another name) fails the run. It writes archives of the
members it makes (``archive``): names, sizes and modes are its own.

``tar`` is GNU tar or bsdtar, both of which read a NUL-separated list of names (``--null -T
-``); a login node without one, or a site whose sshd runs only SFTP for every session
(``ForceCommand internal-sftp``), answers the probe wrongly, and the mover copies file by file
over SFTP instead (``available``). The digests come from ``openssl dgst -sha256``, or
``sha256sum`` where OpenSSL is missing (coreutils' SHA-256 is several times slower).
"""

from __future__ import annotations

import tarfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from hooks.core.spec.layout import RESOLVE
from hooks.core.values.reasons import Reason
from hooks.core.values.text import shown
from hooks.deadline import Deadline
from hooks.pods.movers.errors import MoveError
from hooks.ssh import channels, errors
from hooks.ssh.client import Connection

PROBE = 'command -v tar >/dev/null 2>&1 && tar --version 2>/dev/null | head -n 1'
CREATE = RESOLVE + r"""
cd -- "$d" || exit 3
exec tar -c -b 2048 -f - --no-recursion --null -T -"""
EXTRACT = RESOLVE + r"""
umask 077
mkdir -p -- "$d" && cd -- "$d" || exit 3
exec tar -x -f - --no-same-owner"""
DIGEST = RESOLVE + r"""
cd -- "$d" || exit 3
if openssl dgst -sha256 -r /dev/null >/dev/null 2>&1; then
  exec xargs -0 -r openssl dgst -sha256 -r
fi
exec xargs -0 -r sha256sum"""
BUFFER = 1024 * 1024
"""The archive reader's and writer's buffer."""
BLOCK = 512
END = bytes(BLOCK)
MAX_HEADER = 64 * 1024
"""The longest long name or pax header taken."""


def available(conn: Connection) -> bool:
    """Whether the login node runs a tar the mover can stream through (the probe's answer names
    GNU tar or bsdtar); a refusal or an SFTP-only sshd is no."""
    try:
        result = conn.run(["sh", "-c", PROBE], stdin=b"\n", deadline=Deadline.after(30))
    except errors.SSHError:
        return False
    return result.exit_status == 0 and ("GNU tar" in result.out or "bsdtar" in result.out)


def listed(paths: Sequence[str]) -> bytes:
    """``paths`` as the cluster's programs read them: NUL-separated, each below ``./`` so that
    none reads as an option."""
    return b"".join(b"./" + p.encode(errors="surrogateescape") + b"\0" for p in paths)


class Digests:
    """The cluster's SHA-256 of each of ``paths`` in the directory ``remote_dir``, computed on a
    channel of its own and read on a thread as they arrive; ``of(path)`` waits for one."""

    def __init__(self, conn: Connection, remote_dir: str, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        self.found: dict[str, str] = {}
        self.error: BaseException | None = None
        self.ready = threading.Condition()
        if not paths:
            self.done = True
            return
        self.done = False
        threading.Thread(target=self._read, args=(conn, remote_dir), name="digests",
                         daemon=True).start()

    def _read(self, conn: Connection, remote_dir: str) -> None:
        pending = b""
        order = iter(self.paths)
        try:
            with channels.reading(conn, ["sh", "-c", DIGEST, "hpcbridge-digests", remote_dir],
                                  stdin=listed(self.paths), what="the digests") as chunks:
                for chunk in chunks:
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        self._found(next(order, ""), line)
            if pending or len(self.found) != len(self.paths):
                raise MoveError(Reason.NONE, "The cluster could not compute the digests of "
                                             "all the files.")
        except BaseException as err:  # handed to whoever waits
            self.error = err
        finally:
            with self.ready:
                self.done = True
                self.ready.notify_all()

    def _found(self, path: str, line: bytes) -> None:
        digest = line[:64].decode(errors="replace").lower()
        if not path or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise MoveError(Reason.NONE, "The cluster's digests are not one per file.")
        with self.ready:
            self.found[path] = digest
            self.ready.notify_all()

    def of(self, path: str) -> str:
        """The digest of ``path``, once the cluster has computed it."""
        with self.ready:
            self.ready.wait_for(lambda: path in self.found or self.done)
            if path in self.found:
                return self.found[path]
        if self.error is not None:
            raise self.error
        raise MoveError(Reason.NONE, f"The cluster computed no digest of {shown(path)}.")

    def all(self) -> dict[str, str]:
        """Every digest, once all are computed."""
        for path in self.paths:
            self.of(path)
        return dict(self.found)


class _Bytes:
    """Chunks of bytes read by exact lengths, without copying what passes through."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.left = chunks, memoryview(b"")

    def _more(self) -> bool:
        chunk = next(self.chunks, None)
        if chunk is None:
            return False
        self.left = memoryview(chunk)
        return True

    def exact(self, n: int) -> bytes | None:
        """The next ``n`` bytes; None at the end of the stream, before any of them."""
        pieces, have = [], 0
        while have < n:
            if not self.left and not self._more():
                if have:
                    raise MoveError(Reason.NONE, "The cluster's tar stream broke off.")
                return None
            piece = self.left[:n - have]
            self.left = self.left[len(piece):]
            pieces.append(piece)
            have += len(piece)
        return b"".join(pieces)

    def take(self, n: int) -> Iterator[memoryview]:
        """The next ``n`` bytes, as they arrived."""
        while n > 0:
            if not self.left and not self._more():
                raise MoveError(Reason.NONE, "The cluster's tar stream broke off.")
            piece = self.left[:min(n, BUFFER)]
            self.left = self.left[len(piece):]
            n -= len(piece)
            yield piece


def _padding(size: int) -> int:
    return -size % BLOCK


def members(chunks: Iterator[bytes], expected: Sequence[str]
            ) -> Iterator[tuple[str, int, Iterator[memoryview]]]:
    """The archive in ``chunks``: (name, size, its bytes) of each member, which must be a
    regular file named as ``expected`` says (each name once: tar sends a name listed again as
    a link), in that order. A member's bytes must be read before the next member is asked
    for. The archive is read here rather than by ``tarfile``, whose copies of every byte halved
    the rate; the headers are still ``tarfile``'s to parse (checksums, base-256 sizes), and a
    long name comes as GNU tar's ``L`` member or as a pax ``path`` record."""
    stream, names = _Bytes(chunks), iter(expected)
    while (member := _next(stream)) is not None:
        name, size = member
        due = next(names, None)
        if due is None or name != due:
            raise MoveError(Reason.NONE, f"The cluster's tar sent {shown(name)} where "
                                         f"{shown(due or 'the end')} was due.")
        data = stream.take(size)
        yield name, size, data
        for _ in data:  # what the caller left unread
            pass
        if _padding(size) and stream.exact(_padding(size)) is None:
            raise MoveError(Reason.NONE, "The cluster's tar stream broke off.")
    missing = next(names, None)
    if missing is not None:
        raise MoveError(Reason.NONE, f"The cluster's tar ended before {shown(missing)}.")


def _next(stream: _Bytes) -> tuple[str, int] | None:
    """The next regular file's name and size; None at the archive's end."""
    long_name = ""
    while True:
        header = stream.exact(BLOCK)
        if header is None or header == END:
            return None
        try:
            info = tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
        except tarfile.TarError as err:
            raise MoveError(Reason.NONE, f"The cluster's tar sent a bad header: {err}.") from err
        if info.type in (tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE):
            if info.size > MAX_HEADER:
                raise MoveError(Reason.NONE, "The cluster's tar sent a header too long.")
            body = (stream.exact(info.size + _padding(info.size)) or b"")[:info.size]
            long_name = (body.rstrip(b"\0").decode("utf-8", "surrogateescape")
                         if info.type == tarfile.GNUTYPE_LONGNAME else _pax_path(body))
            continue
        name = (long_name or info.name).removeprefix("./")
        if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            raise MoveError(Reason.NONE, f"The cluster's tar sent {shown(name)}, which is not "
                                         "a regular file.")
        return name, info.size


def _pax_path(records: bytes) -> str:
    """The ``path`` of a pax extended header (records ``<length> <key>=<value>``, each ending
    in a newline); a header that sets a size (the data that follows) is refused."""
    path, at = "", 0
    while at < len(records):
        length = records[at:].partition(b" ")[0]
        if not length.isdigit() or int(length) <= 0:
            raise MoveError(Reason.NONE, "The cluster's tar sent a bad pax header.")
        record = records[at:at + int(length)]
        key, _, value = record.partition(b" ")[2].removesuffix(b"\n").partition(b"=")
        if key == b"path":
            path = value.decode("utf-8", "surrogateescape")
        elif key == b"size" or key.startswith(b"GNU.sparse"):
            raise MoveError(Reason.NONE, "The cluster's tar sent a size in a pax header.")
        at += int(length)
    return path


@dataclass(frozen=True, slots=True)
class Member:
    """A file for ``archive``: its name in the archive, size, mode and bytes."""

    name: str
    size: int
    mode: int
    chunks: Iterator[bytes]


def archive(send: Callable[[bytes], None], files: Iterable[Member],
            sent: Callable[[Member, int], None] = lambda member, size: None) -> None:
    """Write an archive of ``files`` to ``send``, in pieces of about ``BUFFER`` bytes; ``sent``
    is told each member and its size once its bytes are out (a member whose bytes fall short of
    its size, or run past it, fails the run). The headers are ``tarfile``'s (pax, for any name);
    the bytes go out as they come, not through ``tarfile``'s stream, which copies its whole
    buffer on every write."""
    out = _Batched(send)
    for member in files:
        info = tarfile.TarInfo(member.name)
        info.size, info.mode, info.type = member.size, member.mode, tarfile.REGTYPE
        out.put(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))
        count = 0
        for chunk in member.chunks:
            count += len(chunk)
            if count > member.size:
                break
            out.put(chunk)
        if count != member.size:
            raise MoveError(Reason.NONE, f"{shown(member.name)} gave {count} bytes where "
                                         f"{member.size} were due; retried.")
        out.put(bytes(_padding(member.size)))
        sent(member, count)
    out.put(END * 2)
    out.flush()


class _Batched:
    """Small writes gathered into pieces of ``BUFFER`` bytes; large ones passed on as they
    are."""

    def __init__(self, send: Callable[[bytes], None]) -> None:
        self.send, self.pending = send, bytearray()

    def put(self, data: bytes | memoryview) -> None:
        if len(data) >= BUFFER:
            self.flush()
            self.send(bytes(data))
            return
        self.pending += data
        if len(self.pending) >= BUFFER:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.send(bytes(self.pending))
            self.pending.clear()
