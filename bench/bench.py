"""hpcbridge against per-job polling, on the real SLURM test cluster, in one run.

For N = 100, 1000 and 2000 BatchJobs (created through the Metacontroller test driver and
submitted through the hooks), it measures:

- submissions per second through the hooks (one pooled connection per cluster);
- one resync round of N syncs: wall time, remote commands and SSH connections it caused
  (read from the hook server's /metrics), against the baseline of per-job polling as
  existing bridges do it — a new SSH connection plus ``squeue -j`` per job and sync — each
  measured ``REPEATS`` times in turn, and the median taken;
- sync latency at a fixed offered load of 100 syncs/s (median of ``REPEATS`` runs), and
  saturation throughput;
- the hook server's RSS, and its growth per tracked BatchJob between N = 1000 and 2000.

The load generator runs on the same machine. Results go to stdout and to a Markdown file.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from bench import report
from hooks import gunicorn_conf
from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.settings import Settings
from hooks.ssh import errors as ssh_errors
from hooks.ssh.client import Target
from hooks.ssh.login import connect
from tests.driver import Driver, free_port, wait_serving
from tests.integration.conftest import Cluster, cluster_from_state

NAMESPACE = "bench"
SCRIPT = "#!/bin/sh\nsleep 3600\n"
WORKERS = 5
"""Concurrent syncs: Metacontroller's default ``--workers``, which the install keeps."""
REPEATS = 3
"""Each round, baseline round and latency run is measured this many times (rounds and
baseline rounds interleaved); the tables give the median and the runs."""


class Server:
    """The hook server exactly as `make run` starts it, on a free loopback port."""

    def __init__(self, repo: Path) -> None:
        self.port = free_port()
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(self.port),
               "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "2")}  # as `make run`
        self.process = subprocess.Popen(
            [str(repo / ".venv/bin/gunicorn"), "-c", "python:hooks.gunicorn_conf",
             "hooks.app:create_app()"],
            cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_serving(self.url)

    def metric(self, name: str, **labels: str) -> float:
        total = 0.0
        for line in requests.get(f"{self.url}/metrics", timeout=10).text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line
                                                   for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def rss_kib(self) -> int:
        workers = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        pid = workers.read_text().split()[0]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class Client:
    """One keep-alive HTTP connection per thread: the cheapest honest load generator."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def post(self, path: str, body: bytes) -> dict[str, Any]:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                                timeout=60)
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}: {data[:200]!r}")
        answer: dict[str, Any] = json.loads(data)
        return answer


def sync_all(driver: Driver, client: Client, names: list[str], concurrency: int) -> float:
    """One sync of each named BatchJob; the round's wall time.

    Like Metacontroller, which holds the objects in its informer cache, the requests are
    built before the clock starts; the answers are applied to the driver after it stops.
    """
    bodies = [json.dumps(driver.request(NAMESPACE, name)).encode() for name in names]
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(lambda body: client.post("/sync", body), bodies))
    took = time.perf_counter() - started
    for name, answer in zip(names, answers, strict=True):
        driver.apply(NAMESPACE, name, answer, finalizing=False)
    return took


def baseline_round(cluster: Cluster, job_ids: list[str], concurrency: int) -> tuple[float, int]:
    """Per-job polling: a new SSH connection and one squeue -j per job; the round's time and
    its SSH connects. A connection sshd drops (MaxStartups: more than 10 unauthenticated
    connections at once) is opened again, as a polling operator would, and counted."""
    credentials = Credentials(cluster.user, private_key=cluster.key,
                              known_hosts=cluster.known_hosts)
    target = Target(cluster.host, cluster.port)

    def one(job_id: str) -> int:
        for attempt in range(1, 6):
            try:
                conn = connect(target, credentials, deadline=Deadline.after(30))
                break
            except ssh_errors.ClusterUnreachable:
                if attempt == 5:
                    raise
                time.sleep(0.05)
        try:
            conn.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%i|%T|%r"],
                     deadline=Deadline.after(30))
        finally:
            conn.close()
        return attempt

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        connects = sum(pool.map(one, job_ids))
    return time.perf_counter() - started, connects


def latency_at(driver: Driver, client: Client, names: list[str], rate: float,
               seconds: float) -> list[float]:
    """Open loop: one sync every 1/rate s for ``seconds``; each sync's latency in seconds."""
    bodies = [json.dumps(driver.request(NAMESPACE, n)).encode() for n in names]
    latencies: list[float] = []
    lock = threading.Lock()

    def one(body: bytes, due: float) -> None:
        time.sleep(max(0.0, due - time.perf_counter()))
        started = time.perf_counter()
        client.post("/sync", body)
        with lock:
            latencies.append(time.perf_counter() - started)

    count = int(rate * seconds)
    start = time.perf_counter() + 0.2
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        for i in range(count):
            pool.submit(one, bodies[i % len(bodies)], start + i / rate)
    return latencies


def saturation(
    driver: Driver, client: Client, names: list[str], seconds: float, concurrency: int
) -> float:
    """Closed loop with ``concurrency`` clients: syncs answered per second."""
    bodies = [json.dumps(driver.request(NAMESPACE, n)).encode() for n in names]
    done = [0] * concurrency
    stop = time.perf_counter() + seconds

    def worker(k: int) -> None:
        i = k
        while time.perf_counter() < stop:
            client.post("/sync", bodies[i % len(bodies)])
            done[k] += 1
            i += concurrency

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.perf_counter() - started)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def measure(steps: list[int], concurrency: int, cluster: Cluster, repo: Path,
            log: Callable[[str], None]) -> dict[str, Any]:
    server = Server(repo)
    driver = Driver(server.url)
    client = Client(server.port)
    driver.apply_secret({**cluster.secret("bench-login"),
                         "metadata": {"name": "bench-login", "namespace": NAMESPACE}})
    results: dict[str, Any] = {"rounds": [], "concurrency": concurrency}
    names: list[str] = []
    try:
        for n in steps:
            new = [f"bj-{i:05d}" for i in range(len(names), n)]
            for name in new:
                obj = cluster.batchjob(name, SCRIPT, "bench-login",
                                       slurm={"extraArgs": ["--hold"]})
                obj["metadata"]["namespace"] = NAMESPACE
                driver.create(obj)
            names += new
            took = sync_all(driver, client, new, concurrency)
            submit_rate = len(new) / took
            for _ in range(30):  # calls that found a submission in flight (Submitting)
                missing = [m for m in new if not driver.get(NAMESPACE, m)["status"]["jobIDs"]]
                if not missing:
                    break
                time.sleep(1)
                sync_all(driver, client, missing, concurrency)
            lost = [driver.get(NAMESPACE, m)["status"] for m in names
                    if not driver.get(NAMESPACE, m)["status"]["jobIDs"]]
            if lost:
                raise RuntimeError(f"{len(lost)} BatchJobs have no job: {lost[0]}")
            job_ids = [driver.get(NAMESPACE, m)["status"]["jobIDs"][0] for m in names]
            round_times, base_times = [], []
            round_commands = round_connects = 0.0  # the most any of the rounds caused
            baseline_connects = 0
            for _ in range(REPEATS):  # interleaved, so that both sides see the same machine
                time.sleep(server_ttl() + 0.5)  # each round starts with the shared status stale
                commands = server.metric("hpcbridge_remote_commands_total")
                connects = server.metric("hpcbridge_ssh_connects_total")
                round_times.append(sync_all(driver, client, names, concurrency))
                round_commands = max(round_commands,
                                     server.metric("hpcbridge_remote_commands_total") - commands)
                round_connects = max(round_connects,
                                     server.metric("hpcbridge_ssh_connects_total") - connects)
                base_time, base_connects = baseline_round(cluster, job_ids, concurrency)
                base_times.append(base_time)
                baseline_connects = max(baseline_connects, base_connects)
            lost = [driver.get(NAMESPACE, m)["status"] for m in names
                    if not driver.get(NAMESPACE, m)["status"]["jobIDs"]]
            if lost:
                raise RuntimeError(f"{len(lost)} BatchJobs lost their job: {lost[0]}")
            round_time, base_time = statistics.median(round_times), statistics.median(base_times)
            row = {
                "n": n, "submitted": len(new), "submit_rate": submit_rate,
                "round_time": round_time, "round_times": round_times,
                "round_commands": round_commands, "round_connects": round_connects,
                "baseline_time": base_time, "baseline_times": base_times,
                "baseline_commands": n, "baseline_connects": baseline_connects,
                "speedup": base_time / round_time,
                "speedups": [b / r for b, r in zip(base_times, round_times, strict=True)],
                "rss_kib": server.rss_kib(),
            }
            results["rounds"].append(row)
            log(json.dumps(row))
        sample = names[:1000]
        runs = [latency_at(driver, client, sample, rate=100, seconds=20) for _ in range(REPEATS)]
        p50s = [1000 * statistics.median(run) for run in runs]
        p99s = [1000 * percentile(run, 99) for run in runs]
        results["latency"] = {
            "n": len(sample), "count": len(runs[0]), "runs": len(runs),
            "p50_ms": statistics.median(p50s), "p99_ms": statistics.median(p99s),
            "p50s_ms": p50s, "p99s_ms": p99s,
        }
        log(json.dumps(results["latency"]))
        results["saturation"] = saturation(driver, client, names, 10, concurrency)
        log(f"saturation {results['saturation']:.0f} syncs/s")
        rss = {row["n"]: row["rss_kib"] for row in results["rounds"]}
        if 1000 in rss and 2000 in rss:
            results["rss_per_job_kb"] = (rss[2000] - rss[1000]) * 1.024 / 1000
    finally:
        server.stop()
        subprocess.run(["scancel", "-u", cluster.user], check=False)
    return results


def server_ttl() -> float:
    return float(os.environ.get("HPCBRIDGE_STATUS_TTL", "5"))


def write(results: dict[str, Any], path: Path, command: str) -> str:
    lines = [
        "## Syncs: hpcbridge against per-job polling",
        "",
        report.machine(),
        "- cluster: the SLURM 22.05 test cluster (tests/clusters/slurm-up.sh), sshd on "
        "127.0.0.1 with OpenSSH's default MaxSessions 10; jobs submitted `--hold`, so all stay "
        "active (pending)",
        f"- hook server: `make run`'s configuration (gunicorn, {gunicorn_conf.workers} "
        f"process, {Settings.from_env(os.environ).threads} hook threads, status TTL "
        f"{server_ttl():g} s)",
        f"- command: `{command}`; {results['concurrency']} concurrent syncs"
        + (" (Metacontroller's default `--workers`)" if results["concurrency"] == WORKERS
           else f" (Metacontroller with `--workers={results['concurrency']}`)"),
        "- baseline: per-job polling as existing bridges do it — a new SSH connection and one "
        "`squeue -j` per job and sync, at the same concurrency",
        "",
        "| N | submissions/s | resync round | remote commands | SSH connects | "
        "baseline round | baseline commands | baseline connects | speed-up | hook RSS |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["rounds"]:
        lines.append(
            f"| {r['n']} | {r['submit_rate']:.0f} ({r['submitted']} new) | "
            f"{r['round_time']:.2f} s | {r['round_commands']:.0f} | {r['round_connects']:.0f} |"
            f" {r['baseline_time']:.2f} s | {r['baseline_commands']} | "
            f"{r['baseline_connects']} | {r['speedup']:.0f}x "
            f"({', '.join(f'{x:.0f}' for x in r['speedups'])}) | "
            f"{r['rss_kib'] / 1024:.1f} MiB |")
    lat = results["latency"]
    lines += [
        "",
        f"Rounds and baseline rounds: the median of {REPEATS}, measured in turn; the speed-up "
        "is the ratio of the medians, with each pair's ratio in brackets. Remote commands and "
        "SSH connects: the most any of the rounds caused.",
        "",
        f"- sync latency at 100 syncs/s offered ({lat['count']} syncs over {lat['n']} "
        f"BatchJobs, median of {lat['runs']} runs): p50 {lat['p50_ms']:.1f} ms, "
        f"p99 {lat['p99_ms']:.1f} ms (runs: {', '.join(f'{x:.1f}' for x in lat['p99s_ms'])})",
        f"- saturation throughput ({results['concurrency']} syncs at a time, closed loop): "
        f"{results['saturation']:.0f} syncs/s",
    ]
    if "rss_per_job_kb" in results:
        lines.append("- hook-server RSS growth per tracked BatchJob (N = 1000 → 2000): "
                     f"{results['rss_per_job_kb']:.1f} KB")
    text = "\n".join(lines) + "\n"
    report.update(path, "syncs", text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default="100,1000,2000")
    parser.add_argument("--concurrency", type=int, default=WORKERS,
                        help="concurrent syncs, as Metacontroller's --workers")
    parser.add_argument("--out", default="bench/results.md")
    args = parser.parse_args()
    cluster = cluster_from_state("slurm")
    if cluster is None:
        raise SystemExit("the SLURM test cluster is not up: run tests/clusters/slurm-up.sh")
    repo = Path(__file__).resolve().parent.parent
    steps = [int(s) for s in args.steps.split(",")]
    results = measure(steps, args.concurrency, cluster, repo,
                      lambda line: print(line, flush=True))
    command = f"make bench BENCH_ARGS='--steps {args.steps} --concurrency {args.concurrency}'"
    print(write(results, repo / args.out, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
