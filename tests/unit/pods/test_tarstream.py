"""The movers' tar streams against this machine's own GNU tar: the archive the cluster's tar
writes is read member by member, and only regular files of exactly the names asked for, in
order, are taken; the archive the mover writes unpacks with tar into files of the names,
sizes and modes it gave, long and odd names included."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hooks.pods.movers.errors import MoveError
from hooks.pods.movers.tarstream import Member, archive, listed, members


def created(directory: Path, names: list[str]) -> Iterator[bytes]:
    """What ``tar -c --null -T -`` writes for ``names``, as the cluster's would, in small
    chunks."""
    done = subprocess.run(["tar", "-c", "-f", "-", "--no-recursion", "--null", "-T", "-"],
                          input=listed(names), cwd=directory, capture_output=True, check=True)
    data = done.stdout
    return (data[i:i + 7777] for i in range(0, len(data), 7777))


def read_all(chunks: Iterator[bytes], names: list[str]) -> dict[str, bytes]:
    return {name: b"".join(data) for name, _, data in members(chunks, names)}


def test_members_are_read_in_order_whatever_their_names_and_sizes(tmp_path: Path) -> None:
    long = "d/" + "n" * 150 + ".bin"
    files = {"a.txt": b"alpha\n", "-x": b"dash", "sp ace/\u00e9t\u00e9.txt": b"",
             long: os.urandom(3 * 1024 * 1024 + 5)}
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    names = list(files)
    assert read_all(created(tmp_path, names), names) == files


@pytest.mark.parametrize("make, sent, expected", [
    (lambda d: (d / "link").symlink_to("/etc/passwd"), ["link"], ["link"]),
    (lambda d: (d / "sub").mkdir(), ["sub"], ["sub"]),
    (lambda d: (d / "other").write_bytes(b"x"), ["other"], ["wanted"]),
    (lambda d: (d / "a").write_bytes(b"x"), ["a", "a"], ["a"]),
    (lambda d: (d / "a").write_bytes(b"x"), ["a", "a"], ["a", "a"]),  # the second is a link
    (lambda d: (d / "a").write_bytes(b"x"), ["a"], ["a", "b"]),
])
def test_anything_but_the_files_asked_for_fails_the_run(
        tmp_path: Path, make: object, sent: list[str], expected: list[str]) -> None:
    make(tmp_path)  # type: ignore[operator]
    with pytest.raises(MoveError):
        read_all(created(tmp_path, sent), expected)


def test_a_truncated_archive_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(os.urandom(100_000))
    data = b"".join(created(tmp_path, ["a"]))[:50_000]
    with pytest.raises(MoveError, match="broke off"):
        read_all(iter([data]), ["a"])


def test_the_movers_archive_unpacks_with_tar_as_it_says(tmp_path: Path) -> None:
    out = bytearray()
    seen: list[tuple[str, int]] = []
    big = os.urandom(2 * 1024 * 1024 + 1)
    files = [Member("in/a.txt", 3, 0o600, iter([b"a", b"bc"])),
             Member("in/" + "l" * 120 + "/b.bin", len(big), 0o600,
                    iter([big[:1000], big[1000:]])),
             Member("in/empty", 0, 0o600, iter([]))]
    archive(out.extend, files, lambda member, size: seen.append((member.name, size)))
    target = tmp_path / "staging"
    target.mkdir()
    subprocess.run(["sh", "-c", "umask 077; tar -x -f - --no-same-owner"], input=bytes(out),
                   cwd=target, check=True)
    assert (target / "in/a.txt").read_bytes() == b"abc"
    assert (target / "in" / ("l" * 120) / "b.bin").read_bytes() == big
    assert (target / "in/empty").read_bytes() == b""
    assert oct((target / "in/a.txt").stat().st_mode & 0o777) == "0o600"
    assert seen == [(m.name, m.size) for m in files]


@pytest.mark.parametrize("chunks", [[b"ab"], [b"abc", b"def"]])
def test_a_member_other_than_its_size_fails_before_the_archive_ends(chunks: list[bytes]) -> None:
    with pytest.raises(MoveError, match="were due"):
        archive(lambda data: None, [Member("a", 5, 0o600, iter(chunks))])
