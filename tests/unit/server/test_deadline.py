"""The one deadline type: narrowing, what is left, and refusing a step without time."""

from __future__ import annotations

import pytest

from hooks.deadline import Deadline, DeadlineExceeded


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_within_takes_whichever_comes_first() -> None:
    clock = Clock()
    budget = Deadline.after(25, clock)
    assert budget.within(19).left() == 19
    clock.now += 20
    assert budget.within(19).left() == 5


def test_left_is_never_negative() -> None:
    clock = Clock()
    budget = Deadline.after(1, clock)
    clock.now += 5
    assert budget.left() == 0


def test_require_refuses_a_step_without_enough_time() -> None:
    clock = Clock()
    budget = Deadline.after(10, clock)
    assert budget.require(5, "a command") == 10
    clock.now += 6
    with pytest.raises(DeadlineExceeded, match="a command"):
        budget.require(5, "a command")
