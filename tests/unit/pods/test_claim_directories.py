"""A claim's directories made by several workers at once: one that another worker made between
the look and the mkdir is taken, not an error; a link put there instead is still refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hooks.pods.movers import claims
from hooks.pods.movers.errors import MoveError


def racing(monkeypatch: pytest.MonkeyPatch, made_by_other: Any) -> None:
    """``os.lstat`` misses ``sub`` once, as if another worker had not made it yet, and that
    worker then makes it (or a link) before this one's mkdir."""
    real, missed = os.lstat, []

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if Path(path).name == "sub" and not missed:
            missed.append(path)
            made_by_other(Path(path))
            raise FileNotFoundError(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(claims.os, "lstat", lstat)


def test_a_directory_another_worker_made_meanwhile_is_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    racing(monkeypatch, lambda path: path.mkdir())
    assert claims._directory(tmp_path, ["sub"]) == tmp_path / "sub"


def test_a_link_put_there_meanwhile_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    racing(monkeypatch, lambda path: path.symlink_to("/etc"))
    with pytest.raises(MoveError, match="not a directory"):
        claims._directory(tmp_path, ["sub"])
