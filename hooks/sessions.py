"""Where SSH connections come from: one place, so that pooling can live behind it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hooks.core.secret import Credentials
from hooks.ssh.client import Connection, Target, connect


class Sessions:
    """Opens a connection for one hook call and closes it afterwards."""

    @contextmanager
    def open(
        self, target: Target, credentials: Credentials, *, timeout: float
    ) -> Iterator[Connection]:
        conn = connect(target, credentials, timeout=timeout)
        try:
            yield conn
        finally:
            conn.close()
