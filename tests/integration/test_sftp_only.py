"""A login node whose sshd runs SFTP for every session (``ForceCommand internal-sftp``): the
movers' probe for a tar answers no, and the inputs mover stages files one by one over SFTP,
as before the tar stream. The sshd is a second one of the SLURM test cluster, started here from
its configuration with only the forced command changed, on a free port of 127.0.0.1, and
stopped by its PID."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hooks.deadline import Deadline
from hooks.pods.movers import tarstream
from hooks.ssh.client import Target
from hooks.ssh.login import connect
from tests.front import listening
from tests.integration.conftest import REPO, Cluster
from tests.integration.test_ssh_route import login

pytestmark = pytest.mark.slurm


@pytest.fixture
def sftp_only(slurm: Cluster, tmp_path: Path) -> Iterator[int]:
    """The port of an sshd like the cluster's whose every session is SFTP."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lines = [line for line in (slurm.state / "etc/sshd_config").read_text().splitlines()
             if not line.startswith(("Port ", "PidFile ", "ForceCommand "))]
    config = tmp_path / "sshd_config"
    config.write_text("\n".join([f"Port {port}", f"PidFile {tmp_path}/sshd.pid", *lines,
                                 "ForceCommand internal-sftp"]) + "\n")
    config.chmod(0o600)
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(config), "-E",
                             str(tmp_path / "sshd.log")])
    try:
        assert listening(sshd, port, 20), (tmp_path / "sshd.log").read_text()
        yield port
    finally:
        sshd.terminate()
        sshd.wait(timeout=10)


def known_hosts(slurm: Cluster, port: int) -> str:
    key = (slurm.state / "ssh/ssh_host_ed25519_key.pub").read_text().split()[:2]
    return f"[127.0.0.1]:{port} {' '.join(key)}\n"


def test_an_sftp_only_sshd_gets_the_inputs_file_by_file(
        slurm: Cluster, sftp_only: int, tmp_path: Path) -> None:
    hosts = known_hosts(slurm, sftp_only)
    conn = connect(Target("127.0.0.1", sftp_only), login(slurm, hosts),
                   deadline=Deadline.after(20))
    try:
        assert not tarstream.available(conn)
    finally:
        conn.close()
    source = tmp_path / "claim"
    (source / "sub").mkdir(parents=True)
    files = {"a.txt": b"alpha\n", "sub/b.bin": os.urandom(3 * 1024 * 1024)}
    for name, data in files.items():
        (source / name).write_bytes(data)
    secret = tmp_path / "secret"
    secret.mkdir()
    for key, value in slurm.secret("login", known_hosts=hosts)["data"].items():
        (secret / key).write_bytes(base64.b64decode(value))
    remote = f"sftp-only-{os.getpid()}-{time.monotonic_ns()}"
    done = subprocess.run(
        [sys.executable, "-m", "hooks.pods.movers", "inputs", "--host", "127.0.0.1",
         "--port", str(sftp_only), "--secret-dir", str(secret), "--remote-dir",
         f"{remote}/attempt-1", "--staging-dir", f"{remote}/staging-1", "--owner", "o",
         "--plan", json.dumps([{"path": "data/", "dir": str(source)}]),
         "--report", str(tmp_path / "report")], cwd=REPO, capture_output=True, text=True,
        timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "report").read_text())["files"] == 2
    try:
        printed = slurm.as_user(f"cd && cd {remote}/staging-1/data && sha256sum {' '.join(files)}")
        assert printed.split()[::2] == [hashlib.sha256(data).hexdigest()
                                        for data in files.values()]
    finally:
        slurm.as_user(f"cd && rm -rf {remote}")
