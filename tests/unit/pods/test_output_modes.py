"""The outputs mover keeps a file's permission bits in a claim, never wider than 0644: the
listing program (run here by a local ``sh``) reads each file's mode with its size, and a file
is written with exactly that mode masked, whatever the umask, from the moment it exists under
its temporary name; a run again over its own copy narrows a mode an earlier run left wider."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from hooks.deadline import Deadline
from hooks.pods.movers import claims, outputs
from hooks.pods.movers.store import Verified
from hooks.ssh.client import Completed, Target

OWNER = "2b7e1f6a-5c3d-4e8f-9a0b-1c2d3e4f5a6b"


class LocalShell:
    """A ``Remote`` whose commands run on this machine."""

    target = Target("localhost", 22)

    def run(self, argv: Sequence[str], *, stdin: bytes = b"", deadline: Deadline) -> Completed:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, check=False,
                              timeout=30)
        return Completed(done.returncode, done.stdout, done.stderr)

    def stream(self, argv: Sequence[str], sink: Callable[[bytes], None], *, stdin: bytes = b"",
               deadline: Deadline) -> tuple[int, bytes]:
        done = self.run(argv, stdin=stdin, deadline=deadline)
        sink(done.stdout)
        return done.exit_status, done.stderr


def reader(data: bytes) -> Verified:
    return Verified(lambda: iter([data]), len(data), hashlib.sha256(data).hexdigest(), "f")


MODES = [(0o600, 0o600), (0o640, 0o640), (0o644, 0o644), (0o755, 0o644), (0o777, 0o644),
         (0o4755, 0o644), (0o2750, 0o640), (0o1777, 0o644), (0o6700, 0o600), (0o444, 0o444),
         (0o400, 0o400)]


def test_the_listing_reads_each_files_mode(tmp_path: Path) -> None:
    attempt = tmp_path / "attempt"
    (attempt / "sub").mkdir(parents=True)
    for i, (mode, _) in enumerate(MODES):
        path = attempt / ("sub" if i % 2 else "") / f"f{i}"
        path.write_bytes(b"x" * i)
        os.chmod(path, mode)
    sizes, modes = outputs._listing(LocalShell(), str(attempt))
    for i, (mode, _) in enumerate(MODES):
        name = f"sub/f{i}" if i % 2 else f"f{i}"
        assert (sizes[name], modes[name]) == (i, mode), name


@pytest.fixture(params=[0o000, 0o022, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@pytest.mark.parametrize(("source", "landed"), MODES, ids=[f"{m:o}" for m, _ in MODES])
def test_a_file_lands_with_its_own_mode_never_wider_than_0644(
        tmp_path: Path, umask: int, source: int, landed: int) -> None:
    claims.write(tmp_path, "results/secret.key", reader(b"k\n"), OWNER,
                      source & claims.FILE_MODE)
    written = tmp_path / "results" / "secret.key"
    assert stat.S_IMODE(written.stat().st_mode) == landed
    assert written.read_bytes() == b"k\n"
    assert [p.name for p in written.parent.iterdir()] == ["secret.key"]


def test_the_temporary_file_is_never_wider(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked as the bytes are written: the copy under its temporary name has the mode."""
    seen: list[int] = []
    data = b"s" * 10

    def chunks() -> Iterator[bytes]:
        (part,) = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
        seen.append(stat.S_IMODE(part.stat().st_mode))
        yield data

    verified = Verified(chunks, len(data), hashlib.sha256(data).hexdigest(), "f")
    claims.write(tmp_path, "key", verified, OWNER, 0o600)
    assert seen == [0o600]


def test_a_killed_runs_temporary_file_of_another_mode_is_replaced(tmp_path: Path) -> None:
    stale = tmp_path / f".key.{OWNER}.part"
    stale.write_bytes(b"half")
    os.chmod(stale, 0o444)
    claims.write(tmp_path, "key", reader(b"whole\n"), OWNER, 0o600)
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o600
    assert not stale.exists()


def test_a_run_again_narrows_its_own_wider_copy(tmp_path: Path) -> None:
    def write(mode: int) -> None:
        claims.write(tmp_path, "key", reader(b"same\n"), OWNER, mode)

    write(0o644)
    target = tmp_path / "key"
    try:
        os.getxattr(target, claims.ATTRIBUTE)
    except OSError:
        pytest.skip("no user attributes on this file system")
    write(0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
