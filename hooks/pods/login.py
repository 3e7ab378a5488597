"""How a child Pod logs in to the cluster: the login arguments the hooks render for every
child Pod (``hooks.core.wire.child_pod.login_args``), read back here once for the log Pod and
the movers.

The Secrets of the route are mounted read-only, one file per key: the cluster's at
``--secret-dir``, each jump host's at the directory its ``--jump`` names. On a BatchCluster's
route, ``--known-hosts`` holds its host keys, trusted instead of the Secrets' own. A
``known_hosts`` line that cannot be used, or a certificate not valid now, is said plainly
(``SecretError``) instead of as a refused login.
"""

from __future__ import annotations

import argparse
import datetime
from dataclasses import dataclass, replace
from pathlib import Path

from hooks.core.sites.openssh import (
    SecretError,
    check_certificate,
    check_known_hosts,
    read_certificate,
)
from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.ssh import errors
from hooks.ssh.client import Connection, Jump, Target
from hooks.ssh.login import connect

LOGIN_SECONDS = 30.0
CHECKS = {"verify": False, "insecure": True}
"""``--jump``'s CHECK: whether the jump host's host key goes unchecked."""


@dataclass(frozen=True)
class JumpArg:
    """One ``--jump=HOST,PORT,SECRET_DIR,CHECK``: CHECK is ``verify`` (host key checked
    against the known_hosts in SECRET_DIR) or ``insecure``."""

    host: str
    port: int
    secret_dir: Path
    insecure: bool


def jump_arg(text: str) -> JumpArg:
    """Parse ``--jump``; host names and ports hold no comma, so SECRET_DIR may."""
    host, port, rest = [*text.split(",", 2), "", ""][:3]
    secret_dir, _, check = rest.rpartition(",")
    number = int(port) if port.isascii() and port.isdigit() else 0
    if not host or not 0 < number < 65536 or not secret_dir or check not in CHECKS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST,PORT,SECRET_DIR,CHECK (CHECK: verify or insecure)")
    return JumpArg(host, number, Path(secret_dir), CHECKS[check])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The login arguments, as ``login_args`` renders them."""
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, default=22)
    parser.add_argument("--secret-dir", required=True)
    parser.add_argument("--jump", action="append", default=[], type=jump_arg,
                        metavar="HOST,PORT,SECRET_DIR,CHECK",
                        help="a jump host, in order (ssh -J); CHECK is verify or insecure")
    parser.add_argument("--insecure-skip-host-key-check", action="store_true")
    parser.add_argument("--batchcluster", default="",
                        help="the BatchCluster the route comes from")
    parser.add_argument("--known-hosts", default=None,
                        help="the BatchCluster's knownHosts, trusted instead of the Secrets'")


def log_in(args: argparse.Namespace) -> Connection:
    """A connection to the login node over the route the arguments name; ``OSError``,
    ``SecretError`` or ``errors.SSHError`` when there is none."""
    credentials = checked(trusting(read_secret(Path(args.secret_dir)), args.known_hosts))
    jumps = tuple(Jump(hop.host, hop.port, hop.insecure,
                       checked(trusting(read_secret(hop.secret_dir), args.known_hosts),
                               jump=hop.host))
                  for hop in args.jump)
    target = Target(args.host, args.port, args.insecure_skip_host_key_check, jumps,
                    site=args.batchcluster)
    return connect(target, credentials, deadline=Deadline.after(LOGIN_SECONDS))


def why(err: Exception) -> str:
    """A login failure in one sentence."""
    return err.message if isinstance(err, errors.SSHError) else str(err)


def read_secret(directory: Path) -> Credentials:
    """Credentials from a mounted Secret: one file per key."""

    def value(key: str) -> str | None:
        path = directory / key
        return path.read_text() if path.is_file() else None

    return Credentials(
        username=(value("username") or "").strip(),
        private_key=value("ssh-privatekey"),
        passphrase=value("ssh-passphrase"),
        password=value("password"),
        known_hosts=value("known_hosts"),
        certificate=value("ssh-certificate"),
    )


def trusting(credentials: Credentials, known_hosts: str | None) -> Credentials:
    """The credentials with a BatchCluster's host keys instead of the Secret's, if given."""
    return credentials if known_hosts is None else replace(credentials, known_hosts=known_hosts)


def checked(credentials: Credentials, *, jump: str | None = None) -> Credentials:
    """The credentials, if the hooks would take their Secret: a known_hosts line that cannot
    be used, or a certificate that is not valid now, is said plainly instead of as a refused
    login (``SecretError``, naming the jump host whose Secret it is)."""
    try:
        if credentials.known_hosts:
            check_known_hosts(credentials.known_hosts)
        if credentials.certificate:
            check_certificate(read_certificate(credentials.certificate),
                              datetime.datetime.now(datetime.UTC))
    except SecretError as err:
        raise SecretError(f"jump host {jump}: {err}" if jump else str(err)) from err
    return credentials
