"""/healthz and healthy syncs while slow clients and syncs to a blackholed host load the server.

The hook server starts as deploy/ runs it: nginx in front (deploy/base/nginx.conf: HTTPS with
Metacontroller's client certificate, or the same server over plain HTTP) and gunicorn's threaded
workers behind it, with the bearer token over TLS and the probes' port. With ``--baseline-ref``
a commit whose hook server is its own front (``hooks/server.py`` in a gunicorn worker) runs
the same way it was deployed: plain HTTP (`make run`) or HTTPS with the client certificate, the
token and the probes' port. While it runs:

- ``--slow`` slow clients (200) each open a connection (with TLS, presenting the client
  certificate, so that they reach the HTTP layer), send a request line and then one header
  line every ``--interval`` seconds (5), never finishing the head; a client the server cuts
  off connects again at once, so the number stays;
- ``--blackholed`` clients (50) each send syncs, one after the other and at most one a second,
  for a BatchJob whose cluster is a local TCP listener that accepts connections and never
  speaks (so every SSH connect waits for its whole timeout); each sync names credentials of
  its own, so every one is a new connect attempt rather than the pool's remembered failure
  (the hardest case);
- ``--attackers`` clients (80) each send syncs, at most one a second, for BatchJobs of
  namespace ``attacker`` that name the SLURM test cluster's login node behind a jump host that
  accepts TCP connections and never speaks, a new one (a new port) for each sync: the attack
  on another namespace's healthy login node (only when the SLURM test cluster is up);
- one client probes /healthz as the kubelet does (a new connection each time, on the port the
  Deployment's probes use) every 0.1 s, and one client sends syncs for a healthy cluster as
  Metacontroller does (one kept-alive connection): a finished BatchJob, which the hooks answer
  without SSH, and — when the SLURM test cluster is up (tests/clusters/slurm-up.sh) — a second
  client syncs a BatchJob whose job is queued on it.

The load runs in processes of its own, so that its Python work does not delay the measuring
clients. Measured for ``--seconds`` (60) after a few seconds of warm-up: /healthz and healthy-sync
latency (p50, p99, max; a probe or sync without an answer within 5 s or 30 s counts as
failed), how long the blackholed syncs took, and how often the server cut a slow client off.
With ``--baseline-ref``, the same runs for that commit's hook server (from ``git archive``, in
a temporary directory). Results go to stdout and to the ``front`` section of
``bench/results.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import multiprocessing
import os
import ssl
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from cryptography.x509.oid import ExtendedKeyUsageOID

from bench import report
from tests.driver import Driver, free_port
from tests.front import TlsFiles, nginx
from tests.integration.conftest import cluster_from_state
from tests.integration.test_slow_clients import Blackhole, sync_for
from tests.integration.test_tls import issue

REPO = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789abcdef"
PROBE_TIMEOUT = 5.0
SYNC_TIMEOUT = 30.0
"""The hook timeout deploy/'s controller gives Metacontroller."""
WARMUP = 5.0


# --- the requests -------------------------------------------------------------------------

def finished_sync() -> bytes:
    """A sync of a BatchJob whose job succeeded: answered without contacting the cluster."""
    body = json.loads((REPO / "examples/requests/sync-running.json").read_text())
    status = body["parent"]["status"]
    status.update(phase="Succeeded", active=0, succeeded=1, completionTime=status["startTime"])
    for condition in status["conditions"]:
        if condition["type"] == "Running":
            condition.update(status="False", reason="Succeeded", message="Job 4242 succeeded.")
    status["conditions"].append({"type": "Complete", "status": "True", "reason": "Succeeded",
                                 "message": "Job 4242 succeeded.",
                                 "lastTransitionTime": status["startTime"]})
    return json.dumps(body).encode()


# --- the server ---------------------------------------------------------------------------

@dataclass
class Pki:
    ca: Path
    cert: Path
    key: Path
    client: tuple[str, str]
    token: Path


def make_pki(directory: Path) -> Pki:
    ca, ca_cert, ca_key = issue(directory, "hpcbridge-ca")
    server, _, _ = issue(directory, "hooks", signer=(ca_cert, ca_key),
                         usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client, _, _ = issue(directory, "metacontroller", signer=(ca_cert, ca_key))
    token = directory / "token"
    token.write_text(TOKEN)
    return Pki(ca.cert, server.cert, server.key, client.pair, token)


@dataclass
class Server:
    """The hook server of ``code`` with the product's gunicorn settings, plain or as deployed."""

    code: Path
    pki: Pki | None
    log: Path
    port: int = field(default_factory=free_port)
    probe_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    front_port: int = 0
    """nginx's port, in front of gunicorn's (0: the server is its own front)."""
    front: contextlib.ExitStack | None = None
    healthz: str = ""
    """Where the Deployment of this server's code probes /healthz."""

    @property
    def url(self) -> str:
        return f"{'https' if self.pki else 'http'}://127.0.0.1:{self.front_port or self.port}"

    @property
    def own_front(self) -> bool:
        """Whether this code's hook server is its own front (before nginx)."""
        return (self.code / "hooks/server.py").exists()

    def start(self) -> None:
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(self.port),
               "MALLOC_ARENA_MAX": "2", "HPCBRIDGE_LOG_IMAGE": "hpcbridge:bench"}
        if self.own_front and self.pki:
            env.update(HPCBRIDGE_TLS_CERT=str(self.pki.cert), HPCBRIDGE_TLS_KEY=str(self.pki.key),
                       HPCBRIDGE_TLS_CLIENT_CA=str(self.pki.ca))
        if self.pki:
            env.update(HPCBRIDGE_AUTH_TOKEN_FILE=str(self.pki.token))
        if self.pki or not self.own_front:
            env.update(HPCBRIDGE_METRICS_PORT=str(self.probe_port))
        if not self.own_front:
            self.front_port = free_port()
        with self.log.open("w") as sink:
            self.process = subprocess.Popen(
                [str(Path(sys.executable).with_name("gunicorn")), "-c",
                 "python:hooks.gunicorn_conf", "hooks.app:create_app()"],
                cwd=self.code, env=env, stdout=sink, stderr=subprocess.STDOUT)
        self._await()
        if not self.own_front:
            tls = TlsFiles(self.pki.cert, self.pki.key, self.pki.ca) if self.pki else None
            self.front = contextlib.ExitStack()
            nginx_dir = self.log.with_suffix(".nginx")
            nginx_dir.mkdir()
            self.front.enter_context(nginx(nginx_dir, port=self.front_port, upstream=self.port,
                                           tls=tls))

    def _await(self) -> None:
        """Until gunicorn answers /healthz where deploy/'s probes ask it."""
        plain_probe = f"http://127.0.0.1:{self.probe_port}/healthz"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException):
                if ((self.pki or not self.own_front)
                        and requests.get(plain_probe, timeout=2).json() == {"status": "ok"}):
                    self.healthz = plain_probe  # where deploy/'s probes go
                    return
            with contextlib.suppress(requests.RequestException, ValueError):
                if requests.get(f"{self.url}/healthz", timeout=2, verify=self.verify,
                                cert=self.cert).ok:
                    self.healthz = f"{self.url}/healthz"
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the hook server did not start: {self.log.read_text()}")

    def stop(self) -> None:
        if self.front is not None:
            self.front.close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def verify(self) -> str | bool:
        return str(self.pki.ca) if self.pki else True

    @property
    def cert(self) -> tuple[str, str] | None:
        return self.pki.client if self.pki else None

    def session(self) -> requests.Session:
        session = requests.Session()
        session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the private CA
        session.verify, session.cert = self.verify, self.cert
        session.headers["Content-Type"] = "application/json"
        if self.pki:
            session.headers["Authorization"] = f"Bearer {TOKEN}"
        return session

    def prober(self) -> Callable[[], requests.Response]:
        """One probe as the kubelet sends it: a new connection, no client certificate."""
        def probe() -> requests.Response:
            return requests.get(self.healthz, timeout=PROBE_TIMEOUT, verify=self.verify,
                                headers={"Connection": "close"})
        return probe


# --- the load -----------------------------------------------------------------------------

@dataclass
class SlowClients:
    """``n`` clients that each send a header line every ``interval`` seconds, forever."""

    n: int
    interval: float
    port: int
    tls: ssl.SSLContext | None
    cut_off: list[float] = field(default_factory=list)
    connected: int = 0
    shared: Any = None
    """A multiprocessing value that follows ``connected``, for the measuring process."""

    async def one(self, i: int, stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", self.port, ssl=self.tls,
                    server_hostname="127.0.0.1" if self.tls else None)
            except (OSError, ssl.SSLError):
                await asyncio.sleep(0.1)
                continue
            self.connected += 1
            self.shared.value = self.connected
            cut = False
            try:
                writer.write(b"POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                line = 0
                while not stop.is_set():
                    await writer.drain()
                    try:
                        await asyncio.wait_for(reader.read(65536), self.interval)
                    except TimeoutError:
                        line += 1
                        writer.write(f"X-Slow-{i}-{line}: still sending\r\n".encode())
                        continue
                    cut = True  # the server answered (408, say) or closed the connection
                    break
            except (OSError, ssl.SSLError):
                cut = True
            finally:
                self.connected -= 1
                self.shared.value = self.connected
                if cut:
                    self.cut_off.append(time.monotonic() - started)
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()

    def run(self, stop: Any) -> list[float]:
        """Until ``stop`` (a multiprocessing event) is set; how long each cut-off client had
        been connected."""
        async def all_of_them() -> None:
            done = asyncio.Event()
            tasks = [asyncio.create_task(self.one(i, done)) for i in range(self.n)]
            while not stop.is_set():
                await asyncio.sleep(0.2)
            done.set()
            await asyncio.wait(tasks, timeout=self.interval + 5)
            for task in tasks:
                task.cancel()
        asyncio.run(all_of_them())
        return self.cut_off


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)
    failed: int = 0

    def add(self, call: Callable[[], requests.Response]) -> None:
        started = time.perf_counter()
        try:
            ok = call().status_code == 200
        except requests.RequestException:
            ok = False
        if ok:
            self.seconds.append(time.perf_counter() - started)
        else:
            self.failed += 1

    def summary(self) -> dict[str, Any]:
        xs = sorted(self.seconds)
        if not xs:
            return {"n": 0, "failed": self.failed}
        return {"n": len(xs), "failed": self.failed, "p50": statistics.median(xs),
                "p99": xs[min(len(xs) - 1, int(len(xs) * 0.99))], "max": xs[-1]}


def loop_until(stop: threading.Event, samples: Samples, call: Callable[[], requests.Response],
               *, every: float = 0.0) -> threading.Thread:
    def main() -> None:
        while not stop.is_set():
            started = time.monotonic()
            samples.add(call)
            time.sleep(max(0.0, every - (time.monotonic() - started)))
    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def slurm_batchjob(server: Server) -> Iterator[Callable[[], requests.Response] | None]:
    """A sync of a BatchJob whose job is queued on the SLURM test cluster, if it is up."""
    cluster = cluster_from_state("slurm")
    if cluster is None:
        yield None
        return
    driver = Driver(server.url)
    driver.http = server.session()
    name = f"slow-bench-{uuid.uuid4().hex[:8]}"
    driver.apply_secret(cluster.secret(f"{name}-login"))
    obj = driver.create(cluster.batchjob(name, "#!/bin/sh\nsleep 600\n", f"{name}-login"))
    namespace = obj["metadata"]["namespace"]
    try:
        driver.run_to_phase(namespace, name, "Pending", "Running", timeout=60)
        body = json.dumps(copy.deepcopy(driver.request(namespace, name))).encode()
        session = server.session()
        yield lambda: session.post(f"{server.url}/sync", data=body, timeout=SYNC_TIMEOUT)
    finally:
        with contextlib.suppress(Exception):
            driver.finalize(namespace, name)


def load(stop: Any, results: Any, slow: SlowClients | None, server: Server | None,
         blackholed: int, port: int, attackers: int = 0,
         victim: tuple[str, int] | None = None) -> None:
    """The load, in a process of its own so that it takes no time from the measuring one: the
    slow clients, the clients syncing BatchJobs on the blackholed cluster, or the attackers
    naming the ``victim`` login node behind jump hosts that never answer."""
    if slow is not None:
        results.put(slow.run(stop))
        return
    assert server is not None
    samples, threads, local = Samples(), [], threading.Event()
    for _ in range(blackholed):
        session = server.session()
        threads.append(loop_until(local, samples, lambda s=session: s.post(
            f"{server.url}/sync", data=sync_for("127.0.0.1", port, namespace="blackholed"),
            timeout=SYNC_TIMEOUT), every=1.0))
    for _ in range(attackers if victim else 0):
        session = server.session()
        threads.append(loop_until(local, samples, lambda s=session: attack(s, server, victim),
                                  every=1.0))
    stop.wait()
    local.set()
    for thread in threads:
        thread.join(timeout=SYNC_TIMEOUT + 10)
    results.put(samples.summary())


def attack(session: requests.Session, server: Server, victim: Any) -> requests.Response:
    """One sync of namespace ``attacker`` for the victim's login node, behind a jump host that
    never answers and that no sync named before (a new port)."""
    hole = Blackhole()
    try:
        return session.post(f"{server.url}/sync", timeout=SYNC_TIMEOUT, data=sync_for(
            *victim, namespace="attacker", jump=("127.0.0.1", hole.port)))
    finally:
        hole.close()


def run(code: Path, pki: Pki | None, args: argparse.Namespace, log: Path) -> dict[str, Any]:
    server = Server(code, pki, log)
    server.start()
    blackhole = Blackhole()
    fork = multiprocessing.get_context("fork")
    load_stop, connected = fork.Event(), fork.Value("i", 0)
    slow_results, blackholed_results = fork.Queue(), fork.Queue()
    tls = None
    if pki:
        tls = ssl.create_default_context(cafile=str(pki.ca))
        tls.load_cert_chain(*pki.client)
    slow = SlowClients(args.slow, args.interval, server.front_port or server.port, tls,
                       shared=connected)
    cluster = cluster_from_state("slurm")
    victim = (cluster.host, cluster.port) if cluster and args.attackers else None
    attack_results = fork.Queue()
    loads = [fork.Process(target=load, args=(load_stop, slow_results, slow, None, 0, 0)),
             fork.Process(target=load, args=(load_stop, blackholed_results, None, server,
                                             args.blackholed, blackhole.port)),
             fork.Process(target=load, args=(load_stop, attack_results, None, server, 0, 0,
                                             args.attackers, victim))]
    stop = threading.Event()
    healthz, finished, slurm = Samples(), Samples(), Samples()
    threads: list[threading.Thread] = []
    try:
        with slurm_batchjob(server) as slurm_sync:
            for process in loads:
                process.start()
            time.sleep(WARMUP)
            connected_then = connected.value
            threads.append(loop_until(stop, healthz, server.prober(), every=0.1))
            healthy = server.session()
            body = finished_sync()
            threads.append(loop_until(stop, finished, lambda: healthy.post(
                f"{server.url}/sync", data=body, timeout=SYNC_TIMEOUT), every=0.05))
            if slurm_sync is not None:
                threads.append(loop_until(stop, slurm, slurm_sync, every=0.05))
            time.sleep(args.seconds)
            stop.set()
            load_stop.set()
            for thread in threads:
                thread.join(timeout=SYNC_TIMEOUT + 10)
            cut = sorted(slow_results.get(timeout=SYNC_TIMEOUT + 30))
            blackholed = blackholed_results.get(timeout=SYNC_TIMEOUT + 30)
            attacked = attack_results.get(timeout=SYNC_TIMEOUT + 30)
    finally:
        stop.set()
        load_stop.set()
        for process in loads:
            process.join(timeout=SYNC_TIMEOUT + 30)
            if process.is_alive():
                process.kill()
        blackhole.close()
        server.stop()
    return {"healthz": healthz.summary(), "finished": finished.summary(),
            "slurm": slurm.summary() if slurm.seconds or slurm.failed else None,
            "blackholed": blackholed, "attackers": attacked if victim else None,
            "slow_connected": connected_then,
            "cut_off": len(cut), "cut_after": statistics.median(cut) if cut else None}


def baseline_tree(ref: str, into: Path) -> Path:
    """The files of commit ``ref``, read from git without touching the work tree."""
    archive = into / "code.tar"
    with archive.open("wb") as sink:
        subprocess.run(["git", "archive", "--format=tar", ref], cwd=REPO, stdout=sink,
                       check=True)
    code = into / "code"
    code.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(code, filter="data")
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--blackholed", type=int, default=50)
    parser.add_argument("--attackers", type=int, default=80)
    parser.add_argument("--modes", default="plain,tls")
    parser.add_argument("--baseline-ref", default=None,
                        help="also measure the hook server of this commit")
    parser.add_argument("--out", default="bench/results.md")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pki = make_pki(work)
        codes = [("now", REPO)]
        if args.baseline_ref:
            codes.append((args.baseline_ref, baseline_tree(args.baseline_ref, work)))
        for mode in args.modes.split(","):
            for label, code in codes:
                result = run(code, pki if mode == "tls" else None, args,
                             work / f"{label}-{mode}.log")
                rows.append((label, mode, result))
                print(f"{label} {mode}: {json.dumps(result)}", flush=True)
    text = write(rows, args)
    report.update(REPO / args.out, "front", text)
    print(text)
    return 0


def ms(summary: dict[str, Any] | None, key: str) -> str:
    if not summary or key not in summary:
        return "—"
    return f"{summary[key] * 1000:.0f} ms" if summary[key] < 1 else f"{summary[key]:.2f} s"


def spread(summary: dict[str, Any]) -> str:
    """p50 / max (answered, unanswered) of a load's syncs."""
    return (f"{ms(summary, 'p50')} / {ms(summary, 'max')} "
            f"({summary['n']}, {summary['failed']})")


def write(rows: list[tuple[str, str, dict[str, Any]]], args: argparse.Namespace) -> str:
    command = " ".join(
        ["make bench-slow BENCH_ARGS='"
         f"--seconds {args.seconds:g} --slow {args.slow} --blackholed {args.blackholed} "
         f"--attackers {args.attackers}"]
        + ([f"--baseline-ref {args.baseline_ref}"] if args.baseline_ref else [])) + "'"
    lines = [
        "## The front side by side: nginx + gthread and the own front, under slow clients, a "
        "blackholed cluster and an attack on another namespace's login node",
        "",
        report.machine(),
        f"- command: `{command}`; this code: nginx (deploy/base/nginx.conf; plain: the same "
        "server without TLS) in front of gunicorn's gthread workers, the probes' port, over TLS "
        "the bearer token; the server before: its own front in gunicorn's worker, plain HTTP "
        "(`make run`) and as deploy/ ran it (TLS with client certificates, the bearer token, "
        "the probes' port)",
        f"- load for {args.seconds:g} s after {WARMUP:g} s of warm-up: {args.slow} slow clients "
        f"(a header line every {args.interval:g} s, never the end of the head; over TLS with "
        f"the client certificate), {args.blackholed} clients syncing BatchJobs on a cluster "
        "that accepts TCP connections and never answers (each sync with credentials of its "
        "own: a new SSH connect each time, never the pool's remembered failure; namespace "
        f"`blackholed`), and, when the SLURM test cluster is up, {args.attackers} clients of "
        "namespace `attacker` syncing BatchJobs that name the SLURM login node behind a jump "
        "host that never answers, a new port for each sync",
        "- measured: /healthz as the kubelet probes it (a new connection every 0.1 s, where "
        "the Deployment probes: the probes' port, or for the server before, the hook port; "
        f"failed: no answer within {PROBE_TIMEOUT:g} s) and syncs for a healthy "
        "cluster over one kept-alive connection: a finished BatchJob (answered without SSH) "
        "and, when the SLURM test cluster is up, a BatchJob of namespace `research` queued on "
        "it (the attackers' victim) "
        f"(failed: no 200 within {SYNC_TIMEOUT:g} s)",
        "",
        "| server | transport | /healthz p50 / p99 / max (failed) | finished-BatchJob sync "
        "p50 / p99 (failed) | SLURM sync p50 / p99 (failed) | blackholed syncs p50 / max "
        "(answered, unanswered) | attackers' syncs p50 / max (answered, unanswered) | slow "
        "clients connected; cut off (median after) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, mode, r in rows:
        h, f, s, b, a = r["healthz"], r["finished"], r["slurm"], r["blackholed"], r["attackers"]
        slurm = (f"{ms(s, 'p50')} / {ms(s, 'p99')} ({s['failed']})" if s else "not run")
        cut = (f"{r['slow_connected']}; {r['cut_off']} ({r['cut_after']:.1f} s)"
               if r["cut_after"] is not None else f"{r['slow_connected']}; 0")
        lines.append(
            f"| {'nginx + gthread' if label == 'now' else f'own front ({label})'} | {mode} | "
            f"{ms(h, 'p50')} / {ms(h, 'p99')} / {ms(h, 'max')} ({h['failed']}) | "
            f"{ms(f, 'p50')} / {ms(f, 'p99')} ({f['failed']}) | {slurm} | {spread(b)} | "
            f"{spread(a) if a else 'not run'} | {cut} |")
    lines += [
        "",
        "Targets: /healthz p99 at most 100 ms, a healthy cluster's sync p99 at most 1 s. A "
        "blackholed or attacking sync waits for its SSH connect (HPCBRIDGE_CONNECT_TIMEOUT, "
        "8 s) while its route and its namespace hold less than their shares of the hook "
        "threads (HPCBRIDGE_CLUSTER_THREADS, HPCBRIDGE_NAMESPACE_THREADS) and is answered at "
        "once beyond them; \"unanswered\" ones got no answer within the hook timeout.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
