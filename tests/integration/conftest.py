"""Fixtures for the integration tests: the real test clusters, the SSH bastion in front of
them, and a real hook server.

The clusters and the bastion are brought up by ``make test`` (tests/clusters/*-up.sh) before
pytest runs; the fixtures only read their ``env`` files. A cluster that is not up skips its
tests with the reason — except under ``CI=true``, where it fails them: in CI a real-cluster test
never skips. An env file written before the site features (certificates, the command record,
scratch) counts as a cluster that is not up: its bring-up script writes a complete one again.

Also here: the schedulers' own view of the jobs an attempt submitted (``jobs_named`` for SLURM,
``clusters_with_key`` for HTCondor), which the tests compare with what the hooks report.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.driver import REPO, Driver, serving

NAMESPACE = "research"
STATUS_TTL = 1.0
"""The hook server's status cache lifetime in these tests: a sync sees a change after it."""
HELLO = "#!/bin/bash\necho \"hello from $(hostname)\"\necho to-stderr >&2\n"
"""A job writing ``hello from <host>`` to its stdout and ``to-stderr`` to its stderr."""


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: real-cluster tests must run)")
    pytest.skip(reason)


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    """A Secret of the tests' namespace holding ``data`` (plain text, encoded here)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {key: b64(value) for key, value in data.items()}}


def read_from(path: Path, offset: int) -> str:
    """A log's text from ``offset`` (a size it had earlier) on."""
    with path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


@dataclass(frozen=True)
class Cluster:
    """One test cluster: how to reach it over SSH, and root's shortcuts for checking on it."""

    backend: str
    state: Path
    host: str
    port: int
    user: str
    key: str = field(repr=False)
    known_hosts: str = field(repr=False)
    password: str = field(repr=False)
    # What the login node offers for the tests of site features. Files are on this machine;
    # read_text() gives what a Secret would hold.
    cert_key: Path
    """A key in no authorized_keys file: it logs in only with a certificate of ``user_ca``.
    (Given ``-i cert_key``, OpenSSH's client also offers ``cert``, the -cert.pub beside it.)"""
    cert: Path
    """The certificate of ``cert_key`` for ``user``, valid now (and for a day at least)."""
    cert_id: str
    """``cert``'s key ID, which sshd logs: ``Accepted certificate ID "<cert_id>"``."""
    cert_expired: Path
    """A certificate of ``cert_key`` for ``user`` that expired in 2020."""
    cert_future: Path
    """A certificate of ``cert_key`` for ``user`` that becomes valid years from now."""
    user_ca: Path
    """The private key of the user CA sshd trusts, to sign other certificates with."""
    command_log: Path
    """Every command line sshd was asked to run, as records (see ``commands``)."""
    ssh_log: Path
    """sshd's log, at LogLevel VERBOSE."""
    scratch: str
    """A directory outside the home, the user's alone (mode 700), as the user sees it over SSH
    and in jobs; ``on_host(scratch)`` is where it is on this machine."""
    rootfs: str = "/"
    """Where the cluster's files live on this machine: ``/``, or the HTCondor pool's chroot."""

    def secret(self, name: str, *, auth: str = "key", **override: str | None) -> dict[str, Any]:
        data: dict[str, str | None] = {"username": self.user, "known_hosts": self.known_hosts}
        data["ssh-privatekey" if auth == "key" else "password"] = (
            self.key if auth == "key" else self.password)
        data.update(override)
        return secret(name, {k: v for k, v in data.items() if v is not None})

    def batchjob(self, name: str, script: str, secret: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "backend": self.backend,
                "cluster": {"host": self.host, "port": self.port, "secretRef": {"name": secret}},
                "script": script,
                **spec,
            },
        }

    def remote_root(self, batchjob: dict[str, Any]) -> Path:
        meta = batchjob["metadata"]
        home = Path(self.rootfs) / "home" / self.user
        return home / ".hpcbridge" / meta["namespace"] / meta["name"] / meta["uid"]

    def on_host(self, path: str) -> Path:
        """Where a path of the cluster (as the user sees it) is on this machine."""
        return Path(self.rootfs) / path.lstrip("/")

    def commands(self) -> list[str]:
        """The command lines sshd was asked to run so far, oldest first (each record of
        ``command_log`` is the command's text, a NUL byte and a newline; a login shell without
        a command is an empty one). Other tests' commands are there too."""
        records = self.command_log.read_bytes().split(b"\0\n")
        return [record.decode(errors="replace") for record in records[:-1]]

    def as_user(self, script: str, *, stdin: str = "") -> str:
        """Run a shell script on the cluster as the test user (root's shortcut, not SSH)."""
        chroot = ["chroot", self.rootfs] if self.rootfs != "/" else []
        done = subprocess.run([*chroot, "runuser", "-u", self.user, "--", "sh", "-c", script],
                              input=stdin, capture_output=True, text=True, check=True,
                              cwd="/", timeout=60)
        return done.stdout

    def script(self, name: str, *args: str) -> None:
        run_script(name, *args)


def run_script(name: str, *args: str) -> None:
    """Run one of tests/clusters' scripts (the up scripts without their smoke jobs)."""
    env = {**os.environ, "HPCBRIDGE_SLURM_SMOKE": "0", "HPCBRIDGE_CONDOR_SMOKE": "0"}
    subprocess.run(["bash", str(REPO / "tests/clusters" / name), *args], check=True,
                   env=env, timeout=300, capture_output=True)


CLUSTER_ENV = {
    "slurm": ("HPCBRIDGE_SLURM", "/var/tmp/hpcbridge-slurm", "tests/clusters/slurm-up.sh"),
    "htcondor": ("HPCBRIDGE_CONDOR", "/var/tmp/hpcbridge-condor", "tests/clusters/condor-up.sh"),
}


SITE_KEYS = ("CERT_KEY", "CERT", "CERT_ID", "CERT_EXPIRED", "CERT_FUTURE", "USER_CA",
             "COMMAND_LOG", "SSH_LOG", "SCRATCH")
"""What an env file written before the site features lacks."""


def cluster_from_state(backend: str) -> Cluster | None:
    """The test cluster of ``backend`` as its bring-up script described it, or None (no env
    file, or one written before the site features)."""
    prefix, default, _ = CLUSTER_ENV[backend]
    state = Path(os.environ.get(f"{prefix}_STATE", default))
    if not (state / "env").exists():
        return None
    env = read_env(state / "env")
    if any(not env.get(f"{prefix}_{key}") for key in SITE_KEYS):
        return None

    def path(name: str) -> Path:
        return Path(env[f"{prefix}_{name}"])

    return Cluster(
        backend=backend, state=state, host=env[f"{prefix}_HOST"],
        port=int(env[f"{prefix}_PORT"]), user=env[f"{prefix}_USER"],
        key=path("KEY").read_text(), known_hosts=path("KNOWN_HOSTS").read_text(),
        password=env[f"{prefix}_PASSWORD"], rootfs=env.get(f"{prefix}_ROOTFS", "/"),
        cert_key=path("CERT_KEY"), cert=path("CERT"), cert_id=env[f"{prefix}_CERT_ID"],
        cert_expired=path("CERT_EXPIRED"), cert_future=path("CERT_FUTURE"),
        user_ca=path("USER_CA"), command_log=path("COMMAND_LOG"), ssh_log=path("SSH_LOG"),
        scratch=env[f"{prefix}_SCRATCH"],
    )


def up_or_unavailable(backend: str) -> Cluster:
    cluster = cluster_from_state(backend)
    if cluster is None:
        _, default, script = CLUSTER_ENV[backend]
        unavailable(f"the {backend} test cluster is not up (no {default}/env, or one written "
                    f"before the site features): run make test as root, or {script}")
    assert cluster is not None
    return cluster


@pytest.fixture(scope="session")
def slurm() -> Cluster:
    return up_or_unavailable("slurm")


@pytest.fixture(scope="session")
def htcondor() -> Cluster:
    return up_or_unavailable("htcondor")


BACKENDS = [
    pytest.param("slurm", marks=pytest.mark.slurm),
    pytest.param("htcondor", marks=pytest.mark.htcondor),
]


@pytest.fixture(params=BACKENDS)
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The test cluster of each backend in turn."""
    found: Cluster = request.getfixturevalue(request.param)
    return found


@dataclass(frozen=True)
class Route:
    """A login node as a client reaches it through the bastion: by a name only the bastion
    resolves. The known_hosts texts name it so (``[name]:port``), plainly or hashed."""

    name: str
    port: int
    known_hosts: str = field(repr=False)
    known_hosts_hashed: str = field(repr=False)
    known_hosts_file: Path
    known_hosts_hashed_file: Path


DIRECT_TCPIP = re.compile(
    r"server_request_direct_tcpip: originator (\S+) port (\d+), target (\S+) port (\d+)")


@dataclass(frozen=True)
class Bastion:
    """The SSH bastion (tests/clusters/bastion-up.sh): a jump-only user on its own sshd, which
    forwards TCP connections to the login nodes named in ``routes`` and logs each one."""

    state: Path
    host: str
    port: int
    user: str
    key: str = field(repr=False)
    """The jump user's private key (its text, as a Secret holds it)."""
    key_file: Path
    known_hosts: str = field(repr=False)
    """The bastion's own host key line (``[host]:port ...``)."""
    known_hosts_file: Path
    log: Path
    """sshd's log, at LogLevel DEBUG1 (``forwarded`` reads it)."""
    pidfile: Path
    routes: dict[str, Route]
    """By backend (``slurm``, ``htcondor``): the login nodes the bastion fronts."""

    def route(self, backend: str) -> Route:
        if backend not in self.routes:
            unavailable(f"the bastion does not front the {backend} test cluster (it was not up "
                        "when tests/clusters/bastion-up.sh last ran)")
        return self.routes[backend]

    def pid(self) -> int:
        return int(self.pidfile.read_text())

    def log_size(self) -> int:
        """Where the log ends now: ``forwarded(since=...)`` reads on from there."""
        return self.log.stat().st_size

    def forwarded(self, since: int = 0) -> list[tuple[str, int]]:
        """The (name, port) of every connection forwarded since that point of the log (other
        tests' connections too)."""
        return [(m[3], int(m[4])) for m in DIRECT_TCPIP.finditer(read_from(self.log, since))]

    def secret(self, name: str) -> dict[str, Any]:
        """A Secret that logs the jump user in to the bastion."""
        return secret(name, {"username": self.user, "ssh-privatekey": self.key,
                             "known_hosts": self.known_hosts})

    def stop(self) -> None:
        """Stop the bastion's sshd and the connections open through it (by PID). A test that
        does this is an outage test: the bastion is everybody's."""
        run_script("bastion-down.sh")

    def start(self) -> None:
        """Start the bastion again (or leave it running): same keys, names and port."""
        run_script("bastion-up.sh")


BASTION_STATE = "/var/tmp/hpcbridge-bastion"
BASTION_BACKENDS = {"slurm": "SLURM", "htcondor": "CONDOR"}


def bastion_from_state() -> Bastion | None:
    """The bastion as bastion-up.sh described it, or None."""
    state = Path(os.environ.get("HPCBRIDGE_BASTION_STATE", BASTION_STATE))
    if not (state / "env").exists():
        return None
    env = read_env(state / "env")
    routes: dict[str, Route] = {}
    for backend, infix in BASTION_BACKENDS.items():
        prefix = f"HPCBRIDGE_BASTION_{infix}"
        if f"{prefix}_NAME" not in env:
            continue
        plain = Path(env[f"{prefix}_KNOWN_HOSTS"])
        hashed = Path(env[f"{prefix}_KNOWN_HOSTS_HASHED"])
        routes[backend] = Route(
            name=env[f"{prefix}_NAME"], port=int(env[f"{prefix}_PORT"]),
            known_hosts=plain.read_text(), known_hosts_hashed=hashed.read_text(),
            known_hosts_file=plain, known_hosts_hashed_file=hashed)
    key = Path(env["HPCBRIDGE_BASTION_KEY"])
    known_hosts = Path(env["HPCBRIDGE_BASTION_KNOWN_HOSTS"])
    return Bastion(
        state=state, host=env["HPCBRIDGE_BASTION_HOST"], port=int(env["HPCBRIDGE_BASTION_PORT"]),
        user=env["HPCBRIDGE_BASTION_USER"], key=key.read_text(), key_file=key,
        known_hosts=known_hosts.read_text(), known_hosts_file=known_hosts,
        log=Path(env["HPCBRIDGE_BASTION_LOG"]), pidfile=Path(env["HPCBRIDGE_BASTION_PIDFILE"]),
        routes=routes,
    )


@pytest.fixture(scope="session")
def bastion() -> Bastion:
    found = bastion_from_state()
    if found is None:
        unavailable(f"the SSH bastion is not up (no {BASTION_STATE}/env): run make test as root, "
                    "or tests/clusters/bastion-up.sh after the clusters' scripts")
    assert found is not None
    return found


def jobs_named(job_name: str) -> list[str]:
    """Every job SLURM knows by that name, from accounting and the queue (root's view)."""
    accounted = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", "now-1days", f"--name={job_name}", "-o", "JobID"],
        capture_output=True, text=True, check=True).stdout.split()
    queued = subprocess.run(["squeue", "-h", "-t", "all", f"--name={job_name}", "-o", "%F"],
                            capture_output=True, text=True, check=True).stdout.split()
    return sorted({job.split("_")[0] for job in accounted + queued})


def condor(pool: Cluster, *argv: str) -> str:
    """Run an HTCondor command on the pool as the test user."""
    return pool.as_user(shlex.join(argv))


def clusters_with_key(pool: Cluster, key: str) -> list[str]:
    """Every cluster the pool knows by that HpcbridgeKey, in the queue or in the history."""
    constraint = f'HpcbridgeKey == "{key}"'
    queued = condor(pool, "condor_q", "-constraint", constraint, "-af", "ClusterId").split()
    done = condor(pool, "condor_history", "-constraint", constraint, "-af", "ClusterId").split()
    return sorted(set(queued + done))


def start(driver: Driver, cluster: Cluster, name: str, script: str, *, auth: str = "key",
          **spec: Any) -> dict[str, Any]:
    """Apply a working Secret and create a BatchJob on ``cluster``."""
    driver.apply_secret(cluster.secret(f"{name}-login", auth=auth))
    return driver.create(cluster.batchjob(name, script, f"{name}-login", **spec))


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in obj["status"]["conditions"] if c["type"] == kind)
    return found


@contextmanager
def hook_server_with(
    tmp_path_factory: pytest.TempPathFactory, *, status_ttl: float
) -> Iterator[str]:
    """The hook server as deployed: gunicorn with the product's settings, on 127.0.0.1, its
    shared status ``status_ttl`` seconds old at most, the test store allowed; its log must show
    no traceback."""
    log = tmp_path_factory.mktemp("hooks") / "gunicorn.log"
    with serving(log, HPCBRIDGE_LOG_IMAGE="hpcbridge:test",
                 HPCBRIDGE_STATUS_TTL=str(status_ttl), **store_allowed()) as url:
        yield url
    server_log = log.read_text()
    assert "Traceback" not in server_log, server_log


@pytest.fixture(scope="session")
def hook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with hook_server_with(tmp_path_factory, status_ttl=STATUS_TTL) as url:
        yield url


@pytest.fixture
def driver(hook_server: str) -> Driver:
    return Driver(hook_server)


@pytest.fixture
def name() -> str:
    return f"bj-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ObjectStore:
    """The S3 object store of tests/clusters/s3-up.sh (SeaweedFS on loopback): its endpoint
    and the keys of its two identities, a writer and a reader (Read and List only)."""

    state: Path
    endpoint: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    read_access_key: str = field(repr=False)
    read_secret_key: str = field(repr=False)

    def secret(self, name: str, *, reader: bool = False, **override: str) -> dict[str, Any]:
        """A Secret holding the writer's keys (or the reader's), as spec.storage.s3 names it."""
        data = {"AWS_ACCESS_KEY_ID": self.read_access_key if reader else self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.read_secret_key if reader else self.secret_key}
        return secret(name, {**data, **override})


S3_STATE = "/var/tmp/hpcbridge-s3"


def s3_state() -> Path:
    return Path(os.environ.get("HPCBRIDGE_S3_STATE", S3_STATE))


def store_allowed() -> dict[str, str]:
    """The hook server's setting that allows the test store, on loopback, when it is up
    (``HPCBRIDGE_S3_ENDPOINTS``): as an installation allows its on-premises store."""
    env = s3_state() / "env"
    if not env.exists():
        return {}
    return {"HPCBRIDGE_S3_ENDPOINTS": read_env(env)["HPCBRIDGE_S3_ENDPOINT"]}


@pytest.fixture(scope="session")
def object_store() -> ObjectStore:
    state = s3_state()
    if not (state / "env").exists():
        unavailable(f"the S3 object store is not up (no {state}/env): run make test as root, "
                    "or tests/clusters/s3-up.sh")
    env = read_env(state / "env")
    return ObjectStore(
        state=state, endpoint=env["HPCBRIDGE_S3_ENDPOINT"],
        access_key=env["HPCBRIDGE_S3_ACCESS_KEY"], secret_key=env["HPCBRIDGE_S3_SECRET_KEY"],
        read_access_key=env["HPCBRIDGE_S3_READ_ACCESS_KEY"],
        read_secret_key=env["HPCBRIDGE_S3_READ_SECRET_KEY"])
