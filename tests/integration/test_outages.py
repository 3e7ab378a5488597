"""Cluster outages and injected faults: the hooks keep answering 200 with the last known phase,
recover, and never submit an attempt twice.

These tests stop, pause and kill daemons of the shared test clusters (only by the PIDs their
bring-up recorded, always restored on the way out) and hook servers of their own, so they run
alone, after the others.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.driver import REPO, Driver, free_port, wait_serving
from tests.integration.conftest import (
    NAMESPACE,
    STATUS_TTL,
    Cluster,
    clusters_with_key,
    condition,
    jobs_named,
    start,
)

pytestmark = pytest.mark.outage

Object = dict[str, Any]


@contextmanager
def stopped(cluster: Cluster, daemon: str) -> Iterator[None]:
    kind = "slurm" if cluster.backend == "slurm" else "condor"
    cluster.script(f"{kind}-down.sh", daemon)
    time.sleep(STATUS_TTL * 1.5)  # past the shared status the last sync may have left
    try:
        yield
    finally:
        cluster.script(f"{kind}-up.sh")


OUTAGES = [
    pytest.param("slurm", "sshd", marks=pytest.mark.slurm, id="slurm-sshd"),
    pytest.param("slurm", "slurmctld", marks=pytest.mark.slurm, id="slurm-slurmctld"),
    pytest.param("htcondor", "sshd", marks=pytest.mark.htcondor, id="htcondor-sshd"),
    pytest.param("htcondor", "condor_master", marks=pytest.mark.htcondor, id="htcondor-schedd"),
]


@pytest.mark.parametrize(("backend", "daemon"), OUTAGES)
def test_outage_keeps_phase_then_recovers(
    driver: Driver, name: str, backend: str, daemon: str, request: pytest.FixtureRequest
) -> None:
    cluster: Cluster = request.getfixturevalue(backend)
    start(driver, cluster, name, "#!/bin/sh\nsleep 15\necho done\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    with stopped(cluster, daemon):
        answer = driver.sync(NAMESPACE, name)  # the driver gives up after the 30 s hook timeout
        obj = driver.get(NAMESPACE, name)
        assert obj["status"]["phase"] == "Running"
        assert obj["status"]["reason"] == "ClusterUnreachable"
        assert condition(obj, "ClusterReachable")["status"] == "False"
        assert answer["resyncAfterSeconds"] > 0
    obj = driver.run_to_phase(NAMESPACE, name, "Succeeded", timeout=120)
    assert condition(obj, "ClusterReachable")["status"] == "True"
    assert obj["status"]["reason"] == ""


# -- processes: the clusters' daemons by their recorded PIDs, hook servers of the test's own --


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def wait_for(
    check: Callable[[], bool], what: str, timeout: float = 10.0, pause: float = 0.02
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(pause)


def runs(pid: int, program: str) -> bool:
    """Whether ``pid`` runs ``program`` (a path; symlinks such as Debian's alternatives are
    resolved on both sides)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return os.path.realpath(exe.removesuffix(" (deleted)")) == os.path.realpath(program)


def recorded_pid(cluster: Cluster, daemon: str) -> int:
    """The PID the cluster's bring-up recorded for ``daemon``, checked to still run it."""
    pid = int((cluster.state / "pids" / f"{daemon}.pid").read_text().strip())
    assert runs(pid, f"/usr/sbin/{daemon}"), f"{daemon}'s recorded PID {pid} does not run it"
    return pid


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from the parent field of /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        below = children.get(queue.pop(), [])
        found += below
        queue += below
    return found


@contextmanager
def paused(cluster: Cluster, daemon: str) -> Iterator[None]:
    """``daemon`` stopped with SIGSTOP: its clients connect and wait for an answer (up to
    SLURM's MessageTimeout, 10 s) instead of failing. SIGCONT on the way out, whatever happens;
    callers keep the pause to a few seconds."""
    pid = recorded_pid(cluster, daemon)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def kill_sshd(cluster: Cluster) -> list[int]:
    """SIGKILL the cluster's sshd (its recorded PID) and its per-connection sshd processes, so
    open connections die with it (what it ran for them is left running, as after a crash).
    The PIDs killed."""
    master = recorded_pid(cluster, "sshd")
    connections = [p for p in descendants(master) if runs(p, "/usr/sbin/sshd")]
    killed = []
    for pid in (master, *connections):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    wait_for(lambda: not any(alive(pid) for pid in killed), f"sshd {killed} to die")
    return killed


@dataclasses.dataclass
class HookServer:
    """A hook server of the test's own, started as the ``hook_server`` fixture starts one
    (gunicorn with the product's settings, on 127.0.0.1), which the test may SIGKILL and start
    again on the same port, as a restarted Pod behind its Service would be."""

    log: Path
    port: int = dataclasses.field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        assert self.process is None, "already running"
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(self.port),
               "HPCBRIDGE_LOG_IMAGE": "hpcbridge:test", "HPCBRIDGE_STATUS_TTL": str(STATUS_TTL),
               **self.env}
        gunicorn = Path(sys.executable).with_name("gunicorn")
        with self.log.open("a") as sink:
            sink.write(f"--- starting on port {self.port}\n")
            sink.flush()
            self.process = subprocess.Popen(
                [str(gunicorn), "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()"],
                cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            wait_serving(self.url)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {self.log.read_text()}") from None

    def pids(self) -> list[int]:
        """The master's PID and its workers' (the master's children)."""
        assert self.process is not None
        master = self.process.pid
        workers = [int(pid) for thread in Path(f"/proc/{master}/task").iterdir()
                   for pid in (thread / "children").read_text().split()]
        return [master, *workers]

    def kill(self) -> None:
        """SIGKILL the master, then its worker: nothing is finished, nothing cleaned up."""
        assert self.process is not None
        pids = self.pids()
        assert len(pids) == 2, f"expected a master and one worker, found {pids}"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        wait_for(lambda: not any(alive(pid) for pid in pids), f"{pids} to die")
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[HookServer]:
    """A started ``HookServer``. Guards a killed server left without a job id (killed before
    the script was uploaded) are taken over after 30 s instead of the default 120 s, so that
    every kill point recovers within the test's time."""
    server = HookServer(tmp_path / "gunicorn.log", env={"HPCBRIDGE_GUARD_STALE": "30"})
    server.start()
    try:
        yield server
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Traceback" not in log, log


def post_in_background(url: str, body: Object) -> tuple[threading.Thread, list[object]]:
    """POST ``body`` to ``url`` from a thread; the list receives the response or the error."""
    outcome: list[object] = []

    def post() -> None:
        try:
            outcome.append(requests.post(url, json=body, timeout=60))
        except requests.RequestException as error:
            outcome.append(error)

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, outcome


def one_attempt_job(cluster: Cluster, obj: Object) -> list[str]:
    """The scheduler's jobs of attempt 1 of ``obj``: SLURM job ids, HTCondor cluster ids."""
    key = f"{obj['metadata']['uid']}-1"
    return jobs_named(f"hpcb-{key}") if cluster.backend == "slurm" else clusters_with_key(
        cluster, key)


# -- the hook server killed while a submission is in flight --------------------------------


@pytest.mark.slurm
def test_hook_server_killed_while_sbatch_runs_submits_once(
    own_server: HookServer, slurm: Cluster, name: str
) -> None:
    """SIGKILL of the hook server while its guarded submission is half done on the cluster (the
    guard taken, the script written, sbatch waiting on a paused slurmctld): the restarted
    server's retries wait for that submission, then answer its job; one job in all."""
    driver = Driver(own_server.url)
    obj = start(driver, slurm, name, "#!/bin/sh\nsleep 3\n")
    body = driver.request(NAMESPACE, name)
    attempt = slurm.remote_root(obj) / "attempt-1"
    with paused(slurm, "slurmctld"):
        thread, outcome = post_in_background(f"{own_server.url}/sync", body)
        # The guard runs sbatch with its output redirected to submit.out: sbatch has started.
        wait_for((attempt / "submit.out").exists, "sbatch to start", pause=0.001)
        time.sleep(0.2)
        assert not (attempt / "jobid").exists()
        own_server.kill()
        thread.join(timeout=10)
        assert len(outcome) == 1 and isinstance(outcome[0], requests.ConnectionError), outcome
        own_server.start()
        status = driver.sync(NAMESPACE, name)["status"]
        assert (status["phase"], status["reason"], status["jobIDs"]) == (
            "Pending", "Submitting", []), status
    status = driver.run_to_phase(NAMESPACE, name, "Running", "Succeeded", timeout=60)["status"]
    (job,) = status["jobIDs"]
    assert (attempt / "jobid").read_text().split() == [job]
    assert one_attempt_job(slurm, obj) == [job]


KILL_POINTS = {
    "connecting": None,
    "guard-taken": ".guard",
    "script-uploaded": "script",
    "submitting": "submit.out",
    "job-id-recorded": "jobid",
}
"""Where in a BatchJob's first sync the server is killed: 20 ms after the request (it connects
and logs in), or as soon as the attempt's directory on the cluster holds this file. The whole
sync takes about 0.1 s, so the points are events, not times."""


@pytest.mark.parametrize("backend", [
    pytest.param("slurm", marks=pytest.mark.slurm),
    pytest.param("htcondor", marks=pytest.mark.htcondor),
])
def test_hook_server_killed_at_any_point_submits_once(
    own_server: HookServer, backend: str, name: str, request: pytest.FixtureRequest
) -> None:
    """SIGKILL of the hook server at each point of a BatchJob's first sync, a new BatchJob each
    time, then a restart: every BatchJob runs, each on exactly one job."""
    cluster: Cluster = request.getfixturevalue(backend)
    driver = Driver(own_server.url)
    for point, marker in KILL_POINTS.items():
        obj = start(driver, cluster, f"{name}-{point}", "#!/bin/sh\nsleep 2\n")
        attempt = cluster.remote_root(obj) / "attempt-1"
        body = driver.request(NAMESPACE, obj["metadata"]["name"])
        thread, outcome = post_in_background(f"{own_server.url}/sync", body)
        if marker is None:
            time.sleep(0.02)
        else:
            wait_for((attempt / marker).exists, f"{point}: {marker} on the cluster",
                     pause=0.001)
        own_server.kill()
        thread.join(timeout=10)
        assert len(outcome) == 1, outcome
        own_server.start()
    for point in KILL_POINTS:
        obj = driver.run_to_phase(NAMESPACE, f"{name}-{point}", "Running", "Succeeded",
                                  timeout=90)
        jobs = obj["status"]["jobIDs"]
        assert len(jobs) == 1, (point, obj["status"])
        assert one_attempt_job(cluster, obj) == [jobs[0].split(".")[0]], (point, jobs)


# -- sshd killed while a sync's command runs --------------------------------------------------


def running_under(pid: int, program: str) -> bool:
    return any(runs(p, program) for p in descendants(pid))


@pytest.mark.slurm
def test_sshd_killed_mid_command_then_syncs_recover(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    """sshd and its connections SIGKILLed while a sync's squeue runs (it waits on a paused
    slurmctld): that sync answers 200 with the phase kept and ClusterReachable=False; once sshd
    is back, the next syncs reconnect and report the job as the scheduler sees it."""
    start(driver, slurm, name, "#!/bin/sh\nsleep 60\n")
    driver.run_to_phase(NAMESPACE, name, "Running")
    time.sleep(STATUS_TTL * 1.5)  # past the shared status: the next sync runs squeue
    sshd = recorded_pid(slurm, "sshd")
    try:
        with paused(slurm, "slurmctld"):
            began = time.monotonic()
            thread, outcome = post_in_background(f"{driver.url}/sync",
                                                 driver.request(NAMESPACE, name))
            wait_for(lambda: running_under(sshd, "/usr/bin/squeue"), "squeue to run over SSH")
            kill_sshd(slurm)
        thread.join(timeout=30)
        took = time.monotonic() - began
        assert len(outcome) == 1 and isinstance(outcome[0], requests.Response), outcome
        response = outcome[0]
        assert response.status_code == 200, response.text
        assert took < driver.timeout, took
        answer = response.json()
        driver.apply(NAMESPACE, name, answer, finalizing=False)
        obj = driver.get(NAMESPACE, name)
        assert obj["status"]["phase"] == "Running"
        assert obj["status"]["reason"] == "ClusterUnreachable"
        assert "SSH connection" in obj["status"]["message"], obj["status"]["message"]
        assert condition(obj, "ClusterReachable")["status"] == "False"
        assert answer["resyncAfterSeconds"] > 0
    finally:
        slurm.script("slurm-up.sh")
    obj = driver.run_until(
        NAMESPACE, name, lambda o: condition(o, "ClusterReachable")["status"] == "True",
        timeout=60)
    assert (obj["status"]["phase"], obj["status"]["reason"]) == ("Running", "")
    driver.finalize(NAMESPACE, name)


# -- blackholed hosts ----------------------------------------------------------------------------


@contextmanager
def blackhole(greeting: bytes) -> Iterator[int]:
    """A listener on 127.0.0.1 that accepts, sends ``greeting`` and then never another byte
    (nor reads). Its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(conn)
            if greeting:
                conn.sendall(greeting)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()
        listener.close()


HANDSHAKE_TIMEOUT = (re.compile(r"handshake|banner", re.IGNORECASE),
                     re.compile(r"tim(e|ed)[ -]?out|within", re.IGNORECASE))
"""A message naming the handshake (or its banner) and that it timed out."""


@pytest.mark.slurm
@pytest.mark.parametrize("greeting", [b"", b"SSH-2.0-OpenSSH_9.2\r\n"],
                         ids=["silent", "stalls-after-banner"])
def test_blackholed_host_answers_unreachable_in_time(
    driver: Driver, slurm: Cluster, name: str, greeting: bytes
) -> None:
    """A host that accepts the connection and never speaks, or stalls after its banner: the
    sync answers 200 within the hook timeout, ClusterUnreachable, naming the handshake's
    timeout (with a real key and a known_hosts line for that host and port)."""
    with blackhole(greeting) as port:
        hole = dataclasses.replace(slurm, port=port)
        host_key = slurm.known_hosts.split(maxsplit=1)[1]
        driver.apply_secret(hole.secret(f"{name}-login",
                                        known_hosts=f"[127.0.0.1]:{port} {host_key}"))
        batchjob = hole.batchjob(name, "#!/bin/sh\ntrue\n", f"{name}-login")
        batchjob["spec"]["cluster"]["insecureSkipHostKeyCheck"] = False
        driver.create(batchjob)
        for _ in range(2):  # a retry answers the same way, as promptly
            began = time.monotonic()
            answer = driver.sync(NAMESPACE, name)  # fails past the 30 s hook timeout
            took = time.monotonic() - began
            status = driver.get(NAMESPACE, name)["status"]
            assert took < driver.timeout, took
            assert (status["phase"], status["reason"]) == ("Pending", "ClusterUnreachable"), status
            assert condition(driver.get(NAMESPACE, name), "ClusterReachable")["status"] == "False"
            assert answer["resyncAfterSeconds"] > 0
            message = status["message"]
            assert "No existing session" not in message, message
            assert all(pattern.search(message) for pattern in HANDSHAKE_TIMEOUT), message


# -- slurmctld down while many BatchJobs are active -----------------------------------------------


ACTIVE = 50
OUTAGE_SECONDS = 60.0
SYNC_WORKERS = 16
"""Syncs at once: as many as the hook server lets the calls for one cluster run at once
(HPCBRIDGE_CLUSTER_THREADS), so none of them waits in its queue. While SLURM's controller is
down one sync waits for a failing squeue (it tries for ~18 s; the remote timeout ends it at
15 s) and the others answer at once with its error until the status TTL has passed."""
ACTIVE_PHASES = {"PENDING": "Pending", "RUNNING": "Running"}


def sync_all(driver: Driver, names: list[str], workers: concurrent.futures.Executor) -> None:
    """One sync of each BatchJob, concurrently; any answer but 200 fails."""
    for future in [workers.submit(driver.sync, NAMESPACE, n) for n in names]:
        future.result()


def sync_until(
    driver: Driver, names: list[str], workers: concurrent.futures.Executor, end: float,
    check: Callable[[str], None],
) -> dict[str, int]:
    """Sync the BatchJobs in turn, ``SYNC_WORKERS`` at once, each at least once and again
    until ``end`` (monotonic), and ``check`` each after its sync; how often each was synced."""
    due = collections.deque(names)
    synced = dict.fromkeys(names, 0)
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                while due and synced[due[0]] and time.monotonic() >= end:
                    due.popleft()
                if not due:
                    return
                n = due.popleft()
            driver.sync(NAMESPACE, n)
            check(n)
            with lock:
                synced[n] += 1
                due.append(n)

    for future in [workers.submit(work) for _ in range(SYNC_WORKERS)]:
        future.result()
    return synced


def squeue_states(job_ids: list[str]) -> dict[str, str]:
    """SLURM's state of each job still in the queue (root's view)."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i %T"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split() for line in out.splitlines())


@pytest.mark.slurm
def test_slurmctld_outage_with_many_active_batchjobs(
    driver: Driver, slurm: Cluster, name: str
) -> None:
    """slurmctld down for a minute under 50 active BatchJobs (running, or pending: the cluster
    runs few at once): every sync answers 200 within the hook timeout with the phase kept and
    ClusterReachable=False; once it is back, every BatchJob reports its job as SLURM does, and
    each attempt has exactly one job: none lost, none duplicated."""
    names = [f"{name}-{i:02d}" for i in range(ACTIVE)]
    driver.apply_secret(slurm.secret(f"{name}-login"))
    for n in names:
        driver.create(slurm.batchjob(n, "#!/bin/sh\nsleep 240\n", f"{name}-login",
                                     logs={"pod": False}))
    workers = concurrent.futures.ThreadPoolExecutor(SYNC_WORKERS)
    try:
        for future in [workers.submit(driver.run_until, NAMESPACE, n,
                                      lambda o: o["status"]["phase"] in ("Pending", "Running")
                                      and bool(o["status"]["jobIDs"]), timeout=120)
                       for n in names]:
            future.result()
        time.sleep(STATUS_TTL * 1.5)
        sync_all(driver, names, workers)
        before = {n: dict(driver.get(NAMESPACE, n)["status"]) for n in names}
        assert {s["phase"] for s in before.values()} <= {"Pending", "Running"}

        def kept(n: str) -> None:
            obj = driver.get(NAMESPACE, n)
            status = obj["status"]
            assert (status["phase"], status["jobIDs"]) == (
                before[n]["phase"], before[n]["jobIDs"]), (n, status)
            assert status["reason"] == "ClusterUnreachable", (n, status)
            assert condition(obj, "ClusterReachable")["status"] == "False", (n, status)

        with stopped(slurm, "slurmctld"):
            sync_until(driver, names, workers, time.monotonic() + OUTAGE_SECONDS, kept)
        job_ids = {n: before[n]["jobIDs"][0] for n in names}
        deadline = time.monotonic() + 90
        while True:
            sync_all(driver, names, workers)
            states = squeue_states(list(job_ids.values()))
            if all(condition(obj, "ClusterReachable")["status"] == "True"
                   and obj["status"]["reason"] == ""
                   and obj["status"]["jobIDs"] == [job_ids[n]]
                   and obj["status"]["phase"] == ACTIVE_PHASES.get(states.get(job_ids[n], ""))
                   for n in names for obj in [driver.get(NAMESPACE, n)]):
                break
            assert time.monotonic() < deadline, (states, {
                n: driver.get(NAMESPACE, n)["status"] for n in names})
            time.sleep(STATUS_TTL * 1.5)
        found = dict(zip(names, workers.map(
            lambda n: jobs_named(f"hpcb-{driver.get(NAMESPACE, n)['metadata']['uid']}-1"),
            names), strict=True))
        assert {n: jobs for n, jobs in found.items() if jobs != [job_ids[n]]} == {}
        for future in [workers.submit(driver.finalize, NAMESPACE, n) for n in names]:
            future.result()
    finally:
        workers.shutdown()
        leftover = [job for n in names if (NAMESPACE, n) in driver.batchjobs
                    for job in (driver.get(NAMESPACE, n).get("status") or {}).get("jobIDs", [])]
        if leftover:
            subprocess.run(["scancel", *leftover], capture_output=True, check=False, timeout=60)
