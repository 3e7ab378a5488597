"""The field readers of a BatchJob spec: each takes a raw value and the field's name, and
returns the value in its form or raises ``SpecError`` with one sentence naming the field.

They are shared with the scheduler packages' rules, so that every message has the same form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hooks.core.values.text import has_control, shown

INT32 = 2**31 - 1
INT64 = 2**63 - 1


class SpecError(ValueError):
    """The spec breaks a rule; the message is one readable sentence for ``status.message``."""


def mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be an object.")
    return value


def whole_number(value: object, where: str, *, minimum: int, maximum: int = INT32) -> int:
    """A whole number in range; without a maximum of its own, one that fits Kubernetes' int32
    (a number too long to print must never reach a message or a command)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where} must be a whole number, not {shown(value)}.")
    if value < minimum or value > maximum:
        upper = f" and at most {maximum}" if maximum != INT32 or value > maximum else ""
        raise SpecError(f"{where} must be at least {minimum}{upper}, not {shown(value)}.")
    return value


def optional_number(value: object, where: str, *, minimum: int) -> int | None:
    return None if value is None else whole_number(value, where, minimum=minimum)


def flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false, not {shown(value)}.")
    return value


def line(value: object, where: str) -> str | None:
    """An optional single-line string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or has_control(value):
        raise SpecError(f"{where} must be a non-empty single-line string without control "
                        "characters.")
    return value
