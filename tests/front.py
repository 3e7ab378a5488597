"""nginx in front of the hook server, as deploy/ runs it: ``deploy/base/nginx.conf`` itself,
with the tests' ports, files and (where a test needs them shorter) timeouts. Used by
``tests.driver.serving`` and the slow-clients benchmark. nginx is Debian's (``tests/tools.sh``
installs it)."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

CONF = Path(__file__).resolve().parent.parent / "deploy/base/nginx.conf"
DEPLOYED_TLS = "/etc/hpcbridge/tls/"


@dataclass(frozen=True)
class TlsFiles:
    """The serving certificate and key, and the CA of the client certificates (PEM files)."""

    cert: Path
    key: Path
    client_ca: Path


def nginx_binary() -> str:
    """Debian's nginx; a skip without it (a failure under ``CI=true``)."""
    found = shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if os.access(path, os.X_OK)), None)
    if found is None:
        reason = "nginx is not installed (as root, tests/tools.sh installs nginx-light)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: these tests must run)")
        pytest.skip(reason)
    return found


def render(directory: Path, *, port: int, upstream: int, tls: TlsFiles | None,
           **directives: str) -> Path:
    """deploy/'s nginx.conf listening on 127.0.0.1:``port`` (plain HTTP without ``tls``),
    proxying to 127.0.0.1:``upstream``, with its files under ``directory`` and each of
    ``directives`` (``client_header_timeout="2s"``) set to the value given."""
    text = CONF.read_text()
    files = {"tls.crt": tls.cert, "tls.key": tls.key, "ca.crt": tls.client_ca} if tls else {}
    swaps = {"listen 8443 ssl;": f"listen 127.0.0.1:{port}{' ssl' if tls else ''};",
             "proxy_pass http://127.0.0.1:8080;": f"proxy_pass http://127.0.0.1:{upstream};",
             "/tmp/": f"{directory}/",
             **{DEPLOYED_TLS + name: str(path) for name, path in files.items()}}
    for old, new in swaps.items():
        assert old in text, f"{CONF} has no {old!r}"
        text = text.replace(old, new)
    if tls is None:  # plain HTTP: the same server without its TLS lines
        text = re.sub(r"^\s*ssl_.*;\n", "", text, flags=re.MULTILINE)
    for name, value in directives.items():
        text, found = re.subn(rf"^(\s*){name} .*;$", rf"\g<1>{name} {value};", text,
                              flags=re.MULTILINE)
        assert found, f"{CONF} sets no {name}"
    conf = directory / "nginx.conf"
    conf.write_text(text)
    return conf


def listening(process: subprocess.Popen[bytes], port: int, seconds: float) -> bool:
    """Whether ``process`` listens on 127.0.0.1:``port`` within ``seconds`` (False as soon as
    it has exited)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)


@contextmanager
def nginx(directory: Path, *, port: int, upstream: int, tls: TlsFiles | None,
          **directives: str) -> Iterator[Path]:
    """nginx serving ``render``'s configuration until the block ends (stopped by its PID);
    its log file."""
    binary = nginx_binary()
    conf = render(directory, port=port, upstream=upstream, tls=tls, **directives)
    log = directory / "nginx.log"
    # As root, the workers run as this user, not nobody: they read the TLS files (0600).
    user = ["-g", f"user {pwd.getpwuid(os.getuid()).pw_name};"] if os.getuid() == 0 else []
    with log.open("w") as sink:
        process = subprocess.Popen([binary, "-e", "stderr", "-p", str(directory), "-c",
                                    str(conf), *user], stdout=sink, stderr=subprocess.STDOUT)
    try:
        if not listening(process, port, 30):
            raise RuntimeError(f"nginx did not start: {log.read_text()}")
        yield log
    finally:
        process.terminate()
        process.wait(timeout=30)
