"""Readers of the fields of a stored status: each takes what the hooks write and turns anything
else (the status is anyone's to edit) into its default. Pure: no I/O."""

from __future__ import annotations

import re
from typing import Any

from hooks.core.spec.layout import DNS_SUBDOMAIN
from hooks.core.values.fields import INT32, INT64
from hooks.core.values.sdk import SchedulerRules
from hooks.core.values.text import readable

SPEC_HASH = re.compile(r"[0-9a-f]{16}")
WORD_LENGTH = 256
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def job_ids(value: object, scheduler: SchedulerRules | None) -> tuple[str, ...]:
    """The stored task ids of the attempt, if they are all of one job and of its scheduler's
    form; else none (a sync then submits the attempt again, and its guard answers the job id
    it recorded)."""
    if scheduler is None:
        return ()
    ids = [i if isinstance(i, str) else str(i) if 0 <= i < 10**20 else "" for i in as_list(value)
           if isinstance(i, (str, int)) and not isinstance(i, bool)]
    found = [scheduler.task_id_pattern.fullmatch(i) for i in ids]
    if not all(found) or len({m.group(1) for m in found if m}) > 1:
        return ()
    return tuple(ids)


def spec_hash(value: object) -> str:
    return value if isinstance(value, str) and SPEC_HASH.fullmatch(value) else ""


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def enum(kind: Any, value: object, default: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        return default


def count(value: object) -> int:
    """A stored count or generation: positive, and within int64 like a generation."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= INT64:
        return value
    return 0


def exit_code(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -INT32 <= value <= INT32:
        return value
    return None


def signal(value: object) -> int | None:
    """A stored signal number (1 to 127)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 128:
        return value
    return None


def word(value: object) -> str:
    """A stored scheduler word, as the hooks write it: readable, at most ``WORD_LENGTH``
    characters."""
    return value if isinstance(value, str) and readable(value, WORD_LENGTH) == value else ""


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def timestamp(value: object) -> str | None:
    """A stored time as the hooks write it (``2026-11-22T10:00:05Z``), else None."""
    return value if isinstance(value, str) and TIME.fullmatch(value) else None


def name(value: object) -> str | None:
    return value if isinstance(value, str) and DNS_SUBDOMAIN.fullmatch(value) else None
