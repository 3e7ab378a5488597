"""The outputs mover's verified reader, as minio reads it: the memory it holds does not grow
with the file (tracemalloc), the digest it checks (waited for when it is still computed) and
the ETag it expects; work in the background hands back its result or its error."""

from __future__ import annotations

import hashlib
import tracemalloc
from collections.abc import Iterator

import pytest

from hooks.core.values.reasons import Reason
from hooks.pods.movers.store import MAX_PARTS, MIB, PART_SIZE, MoveError, Verified, part_size

PIECE = bytes(range(256)) * 1020  # 255 KiB: an SFTP answer


def pieces(size: int) -> Iterator[bytes]:
    sent = 0
    while sent < size:
        yield PIECE[:size - sent]
        sent += min(len(PIECE), size - sent)


def digest(size: int) -> str:
    sha = hashlib.sha256()
    for piece in pieces(size):
        sha.update(piece)
    return sha.hexdigest()


def peak_reading(size: int) -> int:
    """The most memory held while the reader hands ``size`` bytes on in parts."""
    reader = Verified(lambda: pieces(size), size, digest(size), "big.bin", part=PART_SIZE)
    tracemalloc.start()
    try:
        while reader.read(PART_SIZE):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_memory_a_read_holds_does_not_grow_with_the_file() -> None:
    small, large = peak_reading(32 * MIB), peak_reading(320 * MIB)
    assert large <= small + MIB and large <= 2 * PART_SIZE + 2 * MIB, (small, large)


def test_the_etag_is_that_of_the_parts_and_a_changed_file_is_refused() -> None:
    size = 2 * PART_SIZE + 5
    reader = Verified(lambda: pieces(size), size, digest(size), "a", part=PART_SIZE)
    data = [reader.read(PART_SIZE) for _ in range(3)]
    parts = [hashlib.md5(d, usedforsecurity=False).digest() for d in data]
    assert reader.etag() == hashlib.md5(b"".join(parts), usedforsecurity=False).hexdigest() + "-3"
    changed = Verified(lambda: pieces(size), size, "0" * 64, "a", part=PART_SIZE)
    with pytest.raises(MoveError, match="changed while it was read") as err:
        while changed.read(PART_SIZE):
            pass
    assert err.value.reason is Reason.NONE
    short = Verified(lambda: pieces(10), 20, digest(20), "a")
    with pytest.raises(MoveError, match="ended before its 20 bytes"):
        short.read()


def test_parts_grow_only_beyond_the_stores_most_parts() -> None:
    assert part_size(1) == part_size(MAX_PARTS * PART_SIZE) == PART_SIZE
    assert part_size(MAX_PARTS * PART_SIZE + 1) == PART_SIZE + MIB
    assert -(-2**40 // part_size(2**40)) <= MAX_PARTS


def test_a_digest_still_computed_is_waited_for_once_when_the_last_byte_is_read() -> None:
    asked: list[str] = []

    def later() -> str:
        asked.append("digest")
        return digest(3 * MIB)

    reader = Verified(lambda: pieces(3 * MIB), 3 * MIB, later, "a")
    reader.read(2 * MIB)
    assert asked == []
    reader.read(2 * MIB)
    assert asked == ["digest"] and reader.expected == digest(3 * MIB) and asked == ["digest"]
