"""SSH failures, translated from paramiko and classified by what fixes them.

Each error carries the host and a message fit for ``status.message``: no traceback, no secret.
The SSH transport (``hooks.schedulers.shell``) maps each class to the BatchJob reason that
tells the user whether waiting can help (an unreachable host) or they have to act (a wrong host
key, a refused login, an unreadable key).
"""

from __future__ import annotations


class SSHError(Exception):
    def __init__(self, host: str, message: str) -> None:
        super().__init__(message)
        self.host = host
        self.message = message


class HostKeyMismatch(SSHError):
    """The server's host key is unknown to the Secret's known_hosts, or differs from it."""


class AuthenticationFailed(SSHError):
    """The server refused the key or password."""


class BadCredentials(SSHError):
    """The Secret's key cannot be read (wrong format, or encrypted without a passphrase)."""


class ClusterUnreachable(SSHError):
    """No SSH session could be had: network, DNS, sshd down, or too slow."""


class HostUnreachable(ClusterUnreachable):
    """Nothing answered as an SSH server before any login (no TCP connection, no banner, no key
    exchange): the host's trouble, whatever the credentials."""


class CommandTimeout(ClusterUnreachable):
    """A remote command ran past its deadline (it is killed on the remote side as well)."""
