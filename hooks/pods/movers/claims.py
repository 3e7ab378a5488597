"""An output written into a claim's directory: under a temporary name, synced and renamed, so
it is never partial under its final name, and never over what is not this BatchJob's (a file
replaced only if it holds the same bytes already or its ``user.hpcbridge.owner`` attribute
names this BatchJob). It keeps the source's permission bits, never wider than 0644
(``FILE_MODE``): a file only its owner may read on the cluster stays so in the claim, and
nothing becomes executable or set-id. Directories are made as needed, never through a
symbolic link.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hooks.core.values.reasons import Reason
from hooks.core.values.text import shown
from hooks.pods.movers.errors import MoveError
from hooks.pods.movers.store import Verified

ATTRIBUTE = "user.hpcbridge.owner"
FILE_MODE = 0o644
"""The widest mode of a file written into a claim: the source's own permission bits, never more
than these (no execute, no group or world write, no set-id or sticky bit)."""


def write(root: Path, path: str, reader: Verified, owner: str, mode: int) -> None:
    """Write the reader's file at ``path`` in the claim with ``mode``, exactly (whatever the
    umask), from the moment it exists under its temporary name."""
    folder = _directory(root, path.split("/")[:-1])
    target = folder / path.rpartition("/")[2]
    if _taken(target, reader, owner, mode):
        return
    temporary = folder / f".{target.name}.{owner}.part"
    temporary.unlink(missing_ok=True)  # a killed run's, whatever its mode
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            for chunk in reader.each():
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        # A file system without user attributes: identical bytes still count as ours.
        with contextlib.suppress(OSError):
            os.setxattr(temporary, ATTRIBUTE, owner.encode(), follow_symlinks=False)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _directory(root: Path, parts: list[str]) -> Path:
    """``root``/``parts``, made as needed, never through a symbolic link (files of one
    directory are written by several workers at once: one may make it as another looks)."""
    here = root
    for part in ["", *parts]:
        here = here / part if part else here
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(here, 0o755)
            mode = os.lstat(here).st_mode
        if not stat.S_ISDIR(mode):
            raise MoveError(Reason.OUTPUTS_FAILED, f"{shown(str(here.relative_to(root)))} in "
                            "the claim is not a directory; outputs are not written through "
                            "it.", final=True)
    return here


def _taken(target: Path, reader: Verified, owner: str, mode: int) -> bool:
    """Whether ``target`` holds the reader's bytes already (if it is this BatchJob's and its
    mode is wider than ``mode``, it is narrowed); refused when it holds others that are not this
    BatchJob's."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return False
    if stat.S_ISREG(info.st_mode):
        ours = _ours(target, owner)
        if info.st_size == reader.size and _sha256(target) == reader.expected:
            if ours and stat.S_IMODE(info.st_mode) & ~mode:
                _narrow(target, mode)
            return True
        if ours:
            return False
    raise MoveError(Reason.OUTPUTS_FAILED, f"{shown(target.name)} exists in the claim and is not "
                    "an output of this BatchJob; it is left as it is.", final=True)


def _narrow(target: Path, mode: int) -> None:
    """Set ``target``'s mode to ``mode`` (a copy an earlier run wrote wider), never through a
    symbolic link."""
    fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _ours(target: Path, owner: str) -> bool:
    """Whether ``target``'s ``user.hpcbridge.owner`` attribute names this BatchJob."""
    try:
        return os.getxattr(target, ATTRIBUTE, follow_symlinks=False) == owner.encode()
    except OSError:
        return False


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for chunk in _chunks(path):
        digest.update(chunk)
    return digest.hexdigest()


def _chunks(path: Path) -> Iterator[bytes]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            yield chunk
