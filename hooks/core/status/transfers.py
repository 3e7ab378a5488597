"""``status.inputs`` and ``status.outputs``: what the mover Pods did, and their conditions
``InputsReady`` and ``OutputsCollected``. Pure: no I/O.

While outputs are collected the BatchJob shows ``Running``/``CollectingOutputs``; the attempt's
own end waits in ``status.outputs`` (``attemptPhase``, ``attemptReason``, ``attemptMessage``)
until the collection is over.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from hooks.core.values.fields import INT64
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from hooks.core.values.text import readable


class Stage(enum.StrEnum):
    PENDING = "Pending"
    STAGING = "Staging"
    DONE = "Done"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class Transfer:
    phase: Stage = Stage.PENDING
    files: int = 0
    bytes: int = 0
    message: str = ""
    reason: Reason = Reason.NONE
    """Why the last run failed (``InputNotFound``, ``StorageAccessDenied``, ``OutputsFailed``)."""
    attempt_phase: Phase | None = None
    """Outputs only: how the attempt ended, shown once the collection is over."""
    attempt_reason: Reason = Reason.NONE
    attempt_message: str = ""


def from_raw(raw: object) -> Transfer | None:
    if not isinstance(raw, dict):
        return None
    ended = raw.get("attemptPhase")
    return Transfer(
        phase=_enum(Stage, raw.get("phase"), Stage.PENDING),
        files=_count(raw.get("files")),
        bytes=_count(raw.get("bytes")),
        message=_text(raw.get("message")),
        reason=_enum(Reason, raw.get("reason"), Reason.NONE),
        attempt_phase=_enum(Phase, ended, None) if ended is not None else None,
        attempt_reason=_enum(Reason, raw.get("attemptReason"), Reason.NONE),
        attempt_message=_text(raw.get("attemptMessage")),
    )


def to_raw(transfer: Transfer | None) -> dict[str, Any] | None:
    if transfer is None:
        return None
    raw: dict[str, Any] = {"phase": str(transfer.phase), "files": transfer.files,
                           "bytes": transfer.bytes}
    if transfer.message:
        raw["message"] = readable(transfer.message)
    if transfer.reason is not Reason.NONE:
        raw["reason"] = str(transfer.reason)
    if transfer.attempt_phase is not None:
        raw["attemptPhase"] = str(transfer.attempt_phase)
        raw["attemptReason"] = str(transfer.attempt_reason)
        raw["attemptMessage"] = readable(transfer.attempt_message)
    return raw


def conditions(inputs: Transfer | None, outputs: Transfer | None) -> list[dict[str, str]]:
    """``InputsReady`` and ``OutputsCollected``, each only when the BatchJob has such data."""
    found = []
    for kind, transfer in (("InputsReady", inputs), ("OutputsCollected", outputs)):
        if transfer is not None:
            found.append({"type": kind,
                          "status": "True" if transfer.phase is Stage.DONE else "False",
                          "reason": str(transfer.reason or transfer.phase),
                          "message": transfer.message})
    return found


def _enum(kind: Any, value: object, default: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        return default


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64:
        return value
    return 0


def _text(value: object) -> str:
    return value[:4096] if isinstance(value, str) else ""
