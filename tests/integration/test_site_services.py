"""The test clusters' services for site features, checked with the plain OpenSSH client: the SSH
bastion in front of the login nodes, logins with SSH user certificates, the record of every
command line sshd is asked to run, and the scratch directories jobs can write to.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import Bastion, Cluster, read_from

OPTIONS = [
    "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
    "-o", "IdentityAgent=none", "-o", "StrictHostKeyChecking=yes",
    "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
]
"""OpenSSH client options: nothing from ~/.ssh or /etc/ssh, only the key and host keys given."""


def private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def ssh(host: str, port: int, user: str, key: Path, known_hosts: Path, command: str, *,
        stdin: str = "", proxy: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = ["ssh", *OPTIONS, "-o", f"UserKnownHostsFile={known_hosts}", "-i", str(key),
            "-p", str(port)]
    if proxy is not None:
        argv += ["-o", f"ProxyCommand={proxy}"]
    return subprocess.run([*argv, f"{user}@{host}", command], input=stdin, capture_output=True,
                          text=True, timeout=180)


def login(cluster: Cluster, tmp_path: Path, command: str, *,
          stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``command`` on the cluster's login node over SSH, with the test user's key."""
    key = private(tmp_path / "id", cluster.key)
    known_hosts = private(tmp_path / "known_hosts", cluster.known_hosts)
    return ssh(cluster.host, cluster.port, cluster.user, key, known_hosts, command, stdin=stdin)


def jump(bastion: Bastion) -> str:
    """A ProxyCommand that reaches %h:%p through the bastion."""
    return shlex.join([
        "ssh", *OPTIONS, "-o", f"UserKnownHostsFile={bastion.known_hosts_file}",
        "-i", str(bastion.key_file), "-p", str(bastion.port), "-W", "%h:%p",
        f"{bastion.user}@{bastion.host}"])


# -- the bastion -------------------------------------------------------------------------------

@pytest.mark.parametrize("hashed", [False, True], ids=["known-hosts", "hashed-known-hosts"])
def test_login_through_the_bastion_by_its_name_for_the_node(
        cluster: Cluster, bastion: Bastion, tmp_path: Path, hashed: bool) -> None:
    route = bastion.route(cluster.backend)
    assert route.port == cluster.port
    known_hosts = route.known_hosts_hashed_file if hashed else route.known_hosts_file
    assert (route.name in known_hosts.read_text()) is not hashed
    since = bastion.log_size()
    done = ssh(route.name, route.port, cluster.user, private(tmp_path / "id", cluster.key),
               known_hosts, "id -un", proxy=jump(bastion))
    assert (done.returncode, done.stdout) == (0, f"{cluster.user}\n"), done.stderr
    assert (route.name, route.port) in bastion.forwarded(since)


def test_the_login_nodes_names_resolve_only_on_the_bastion(
        cluster: Cluster, bastion: Bastion, tmp_path: Path) -> None:
    route = bastion.route(cluster.backend)
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo(route.name, route.port)
    assert subprocess.run(["getent", "ahosts", route.name], capture_output=True).returncode == 2
    done = ssh(route.name, route.port, cluster.user, private(tmp_path / "id", cluster.key),
               route.known_hosts_file, "id -un")
    assert done.returncode == 255
    assert "Could not resolve hostname" in done.stderr


def test_the_jump_user_gets_no_shell(bastion: Bastion) -> None:
    done = ssh(bastion.host, bastion.port, bastion.user, bastion.key_file,
               bastion.known_hosts_file, "id -un")
    # Its login shell is nologin, which only says so.
    assert done.returncode != 0
    assert bastion.user not in done.stdout


# -- SSH user certificates ---------------------------------------------------------------------

@pytest.mark.parametrize(("certificate", "refusal"), [
    ("cert", None),
    ("cert_expired", "Certificate invalid: expired"),
    ("cert_future", "Certificate invalid: not yet valid"),
    (None, None),
], ids=["valid", "expired", "not-yet-valid", "no-certificate"])
def test_the_certificate_key_logs_in_with_a_valid_certificate_only(
        cluster: Cluster, tmp_path: Path, certificate: str | None, refusal: str | None) -> None:
    # The key alone in a directory of its own, since OpenSSH's client also offers KEY-cert.pub.
    key = private(tmp_path / "key", cluster.cert_key.read_text())
    if certificate is not None:
        cert = getattr(cluster, certificate)
        assert isinstance(cert, Path)
        shutil.copyfile(cert, tmp_path / "key-cert.pub")
    known_hosts = private(tmp_path / "known_hosts", cluster.known_hosts)
    since = cluster.ssh_log.stat().st_size
    done = ssh(cluster.host, cluster.port, cluster.user, key, known_hosts, "id -un")
    if certificate == "cert":
        assert (done.returncode, done.stdout) == (0, f"{cluster.user}\n"), done.stderr
        assert f'Accepted certificate ID "{cluster.cert_id}"' in read_from(cluster.ssh_log, since)
    else:
        assert done.returncode == 255
        assert "Permission denied" in done.stderr
        if refusal is not None:
            assert refusal in read_from(cluster.ssh_log, since)


# -- the record of every command ---------------------------------------------------------------

def test_commands_are_recorded_and_run_untouched(cluster: Cluster, tmp_path: Path) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    command = f"timeout -k 3 30 sh -c 'cat; echo \"$1\" >&2; exit 3' name {marker}"
    done = login(cluster, tmp_path, command, stdin="to stdin\n")
    assert (done.returncode, done.stdout, done.stderr) == (3, "to stdin\n", f"{marker}\n")
    multiline = f"echo {marker}-1\necho '{marker}-2'"
    done = login(cluster, tmp_path, multiline)
    assert (done.returncode, done.stdout) == (0, f"{marker}-1\n{marker}-2\n"), done.stderr
    recorded = cluster.commands()
    assert command in recorded
    assert multiline in recorded


def test_sftp_runs_through_the_recorder(cluster: Cluster, tmp_path: Path) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    (tmp_path / "upload").write_text(marker)
    (tmp_path / "batch").write_text(f"put {tmp_path}/upload {marker}\nrm {marker}\n")
    key = private(tmp_path / "id", cluster.key)
    known_hosts = private(tmp_path / "known_hosts", cluster.known_hosts)
    done = subprocess.run(
        ["sftp", *OPTIONS, "-o", f"UserKnownHostsFile={known_hosts}", "-i", str(key),
         "-P", str(cluster.port), "-b", str(tmp_path / "batch"), f"{cluster.user}@{cluster.host}"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "internal-sftp" in cluster.commands()


# -- scratch directories -----------------------------------------------------------------------

def test_the_scratch_directory_is_the_users_alone_outside_the_home(cluster: Cluster) -> None:
    home = cluster.on_host(f"/home/{cluster.user}")
    scratch = cluster.on_host(cluster.scratch)
    assert not scratch.is_relative_to(home)
    assert (scratch.stat().st_uid, scratch.stat().st_mode & 0o777) == (home.stat().st_uid, 0o700)


def test_a_job_writes_to_the_scratch_directory(cluster: Cluster, tmp_path: Path) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    path = f"{cluster.scratch}/{marker}"
    write = f"echo {marker} > {path}"
    if cluster.backend == "slurm":
        done = login(cluster, tmp_path,
                     f"sbatch --wait --output=/dev/null --wrap {shlex.quote(write)}")
    else:
        description = (f"executable = /bin/sh\narguments = \"-c '{write}'\"\n"
                       f"transfer_executable = false\nlog = {path}.log\nqueue\n")
        done = login(cluster, tmp_path, f"condor_submit -terse && condor_wait -wait 120 {path}.log",
                     stdin=description)
    assert done.returncode == 0, done.stdout + done.stderr
    assert cluster.on_host(path).read_text() == f"{marker}\n"
    cluster.as_user(f"rm -f {path} {path}.log")
