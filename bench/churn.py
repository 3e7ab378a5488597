"""Memory and metrics of the hook server under churn: 20 000 distinct BatchJobs, each with its
own host, credentials and uid, through the server as `make run` starts it (with a short
``HPCBRIDGE_IDLE_SECONDS``, so that eviction runs during the benchmark).

The BatchJobs' clusters are closed ports on 127.0.0.1 (each sync fails to connect at once), so
every sync leaves what a sync leaves behind — a pool slot per credential set, a failed connect,
metric series — and nothing needs a real cluster. After every step of ``--step`` BatchJobs the
benchmark waits for an eviction and records the worker's RSS and the size of /metrics; flat
figures after eviction mean nothing grows with the number of BatchJobs seen. Results go to
stdout and to the ``churn`` section of ``bench/results.md``.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import requests

from bench import report
from tests.driver import free_port, wait_serving

REPO = Path(__file__).resolve().parent.parent
IDLE = 4.0
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
"""A real public key: the hook server refuses a known_hosts line whose key does not parse."""


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def body(i: int, closed: int) -> dict[str, object]:
    uid = str(uuid.uuid4())
    secret = {"metadata": {"name": "login", "namespace": "churn"},
              "data": {"username": b64("u"), "password": b64(f"password-{i}"),
                       "known_hosts": b64(f"h-{i} {HOST_KEY}\n")}}
    return {"controller": {}, "parent": {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": f"job-{i}", "namespace": "churn", "uid": uid, "generation": 1},
        "spec": {"backend": "slurm", "script": "#!/bin/sh\ntrue\n",
                 "cluster": {"host": f"127.0.{i // 250 % 250}.{i % 250 + 1}", "port": closed,
                             "secretRef": {"name": "login"}}}},
        "children": {"Pod.v1": {}}, "related": {"Secret.v1": {"login": secret}},
        "finalizing": False}


def rss_kib(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    status = Path(f"/proc/{children[0]}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("VmRSS:")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--step", type=int, default=2500)
    parser.add_argument("--out", default="bench/results.md")
    args = parser.parse_args()
    port, closed = free_port(), free_port()
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "MALLOC_ARENA_MAX": "2",
           "HPCBRIDGE_IDLE_SECONDS": str(IDLE)}
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "-c", "python:hooks.gunicorn_conf",
         "hooks.app:create_app()"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        wait_serving(url)
        session = requests.Session()
        rows.append((0, rss_kib(server.pid),
                     len(session.get(f"{url}/metrics", timeout=10).content)))

        def sync(i: int) -> int:
            return session.post(f"{url}/sync", data=json.dumps(body(i, closed)),
                                headers={"Content-Type": "application/json"},
                                timeout=60).status_code

        with concurrent.futures.ThreadPoolExecutor(5) as workers:
            for start in range(0, args.jobs, args.step):
                codes = set(workers.map(sync, range(start, start + args.step)))
                assert codes == {200}, codes
                time.sleep(IDLE + 1)
                sync(start)  # a call after the idle time runs the eviction
                metrics = len(session.get(f"{url}/metrics", timeout=10).content)
                rows.append((start + args.step, rss_kib(server.pid), metrics))
                print(f"{rows[-1][0]} BatchJobs: RSS {rows[-1][1] / 1024:.1f} MiB, "
                      f"/metrics {metrics / 1024:.1f} KiB", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    text = write(rows, args)
    report.update(REPO / args.out, "churn", text)
    print(text)
    return 0


def write(rows: list[tuple[int, int, int]], args: argparse.Namespace) -> str:
    lines = [
        "## Churn: memory and metrics with distinct BatchJobs",
        "",
        report.machine(),
        f"- command: `.venv/bin/python -m bench.churn --jobs {args.jobs} --step {args.step}`;"
        f" hook server as `make run` starts it, with HPCBRIDGE_IDLE_SECONDS={IDLE:g}",
        "- every BatchJob has its own uid, host, password and known_hosts; its cluster is a "
        "closed port, so each sync fails to connect at once and leaves a pool slot, a failed "
        "connect and metric series behind until eviction",
        "",
        "| BatchJobs seen | worker RSS after eviction | /metrics |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {n} | {rss / 1024:.1f} MiB | {size / 1024:.1f} KiB |" for n, rss, size in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
