"""paramiko's ``Transport``, with one deadlock taken out.

During a key exchange paramiko holds back every message but the exchange's own, and a thread
that sends one waits until the exchange is over. The transport's own thread sends some too:
the CLOSE that answers the server's CLOSE of a channel, the replies to a channel's requests.
When that thread waits, the exchange, which only it can finish, never does: paramiko 5.1 then
gives up after 30 s ("Key-exchange timed out waiting for key negotiation") and the connection
dies. paramiko starts an exchange every 512 MiB received and the server every few GiB, and a
channel closes at the end of every command, so a long transfer beside a few commands meets it
(a 512 MiB file through one exec channel did, every time). Here such a message of the
transport's own thread waits in a queue instead and goes out as soon as the exchange is over,
as the protocol wants it.
"""

from __future__ import annotations

import threading
from typing import Any

import paramiko
from paramiko.message import Message


class Transport(paramiko.Transport):
    # paramiko's type stubs leave out the private methods overridden and called here.

    def __init__(self, sock: Any) -> None:
        super().__init__(sock)
        self._held: list[Message] = []

    def _send_user_message(self, data: Message) -> None:
        if threading.current_thread() is not self:
            super()._send_user_message(data)  # type: ignore[misc]
            return
        with self.clear_to_send_lock:
            if self.clear_to_send.is_set():
                self._send_message(data)  # type: ignore[attr-defined]
            else:
                self._held.append(data)

    def _parse_newkeys(self, m: Message) -> None:
        super()._parse_newkeys(m)  # type: ignore[misc]
        with self.clear_to_send_lock:
            if self.clear_to_send.is_set():
                held, self._held = self._held, []
                for data in held:
                    self._send_message(data)  # type: ignore[attr-defined]
