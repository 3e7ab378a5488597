"""The error of a mover run: the reason the BatchJob reports and one sentence
(``hooks.pods.movers.store`` and ``hooks.pods.movers.peer`` raise it; the program reports it)."""

from __future__ import annotations

from hooks.core.values.reasons import Reason


class MoveError(Exception):
    """A copy failed: its reason (``NONE`` for trouble that a run again may not meet) and one
    sentence. ``final``: running again cannot help (outputs only)."""

    def __init__(self, reason: Reason, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.final = final
