"""The one deadline type: a point in monotonic time by which a hook call's remote work is done.

A hook call starts with one ``Deadline`` for its whole budget (``HPCBRIDGE_SYNC_BUDGET``) and
hands narrower ones down the stack — ``within(seconds)`` for one connect or one command — to the
status cache, the connection pool and the SSH channel, which never wait past the deadline they
were given. The SSH layer knows how long a command can outlive its remote limit
(``hooks.ssh.client.OVERRUN``) and subtracts it itself, so nothing above it adds slack by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]


class DeadlineExceeded(TimeoutError):
    """The deadline left too little time for the next step."""


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float
    clock: Clock = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def after(cls, seconds: float, clock: Clock = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock)

    def left(self) -> float:
        """Seconds until the deadline, never negative."""
        return max(0.0, self.at - self.clock())

    def within(self, seconds: float) -> Deadline:
        """This deadline, or ``seconds`` from now if that comes first: the time of one step."""
        return Deadline(min(self.at, self.clock() + seconds), self.clock)

    def socket_timeout(self) -> float:
        """Seconds for one blocking socket call: what is left, but never zero (which would
        block)."""
        return max(0.05, self.left())

    def require(self, seconds: float, what: str) -> float:
        """The seconds left, when at least ``seconds`` are; else ``DeadlineExceeded``."""
        left = self.left()
        if left < seconds:
            raise DeadlineExceeded(f"no time left for {what}")
        return left
