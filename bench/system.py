"""The whole system at scale: N BatchJobs created at once by one ``kubectl create -f``, through
the API server, Metacontroller, the hooks and the scheduler, on the Kubernetes cluster KUBECONFIG
points at (with the CRD, Metacontroller and the hooks installed: nothing is brought up here).

In a fresh namespace, with watches on its BatchJobs, Pods and Events started before anything is
created, it measures the time until every BatchJob has its job id and until every one has
Succeeded (from the moment the last one exists), the writes per BatchJob over its whole life
(bench/writes.py says how they are counted), the hooks' syncs per BatchJob, the scheduler jobs
per BatchJob, the CPU of named process trees (bench/cpu.py), and optionally the API server's
request rate at steady state and a disruption (a command run when half have their job ids).
Then it deletes every BatchJob, waits until all are gone, and deletes the namespace. Results go
to stdout, to the ``system-<label>`` section of bench/results.md and to bench/system-<label>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import secrets
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

from bench import prometheus, system_options, system_report
from bench.cluster_env import ClusterEnv
from bench.cpu import TreeCPU
from bench.kube import Kube, KubeError, kubectl
from bench.writes import Recorder

REPO = Path(__file__).resolve().parent.parent
API = "/apis/hpcbridge.io/v1alpha1/namespaces/{}/batchjobs"
SECRET = "bench-login"
STABLE = 10.0
"""Steady state starts once the number of Running BatchJobs has not changed for this long."""


class Run:
    """One benchmark run: its namespace, its watches and its timeline (monotonic seconds)."""

    def __init__(self, kube: Kube, args: argparse.Namespace) -> None:
        self.kube, self.args = kube, args
        self.namespace = f"hpcbridge-bench-{secrets.token_hex(3)}"
        self.api = API.format(self.namespace)
        self.names = [f"bj-{i:05d}" for i in range(args.jobs)]
        self.recorder = Recorder()
        self.stop = threading.Event()
        self.cpu = TreeCPU({n: int(p) for n, p in (c.split("=", 1) for c in args.cpu)})
        self.times: dict[str, float] = {"start": time.monotonic()}
        self.started = datetime.datetime.now() - datetime.timedelta(seconds=5)
        self.results: dict[str, Any] = {}
        self.hooks_before = self.hooks_after = self.hooks_gone = ""
        self.cpu_before: dict[str, float] = {}
        self.cpu_after: dict[str, float] = {}

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.times['start']:6.1f} s] {text}", flush=True)

    def hooks(self) -> str:
        url = self.args.hooks_metrics
        return requests.get(url, timeout=10).text if url else ""

    def prepare(self) -> dict[str, Any]:
        """The namespace, its ServiceAccount and login Secret, the watches; the spec's
        placement part."""
        ns = self.namespace
        labels = dict(label.split("=", 1) for label in self.args.namespace_label)
        self.kube.post("/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})
        # Where no controller-manager makes it, the log Pods need the default ServiceAccount.
        self.kube.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                       {"metadata": {"name": "default"}}, ok=(409,))
        if self.args.cluster_env:
            env = ClusterEnv(self.args.cluster_env)
            secret, spec = env.secret(SECRET), env.spec(SECRET)
        else:
            source = self.kube.get(f"/api/v1/namespaces/{self.args.secret_namespace}"
                                   f"/secrets/{self.args.secret}")
            secret = {"type": source.get("type", "Opaque"), "data": source.get("data", {}),
                      "metadata": {"name": self.args.secret}}
            spec = {"cluster": {"name": self.args.batchcluster,
                                "secretRef": {"name": self.args.secret}}}
        self.kube.post(f"/api/v1/namespaces/{ns}/secrets", secret)
        for path, handler in ((self.api, self.recorder.batchjob),
                              (f"/api/v1/namespaces/{ns}/pods", self.recorder.pod),
                              (f"/api/v1/namespaces/{ns}/events", self.recorder.event)):
            self.kube.watch(path, handler, self.stop)
        self.log(f"namespace {ns} ready, watches started")
        return spec

    def create(self, spec: dict[str, Any]) -> None:
        seconds = self.args.script_seconds
        script = f"#!/bin/bash\nsleep {seconds:g}\n" if seconds else "#!/bin/bash\ntrue\n"
        docs = [{"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
                 "metadata": {"name": name, "namespace": self.namespace},
                 "spec": {"backend": self.args.backend, "script": script, **spec}}
                for name in self.names]
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            file.write("\n".join(json.dumps(doc) for doc in docs))
            file.flush()
            self.hooks_before = self.hooks()
            self.times["create"] = time.monotonic()
            self.cpu_before = self.cpu.sample()
            kubectl("create", "-f", file.name, "-o", "name")
            self.times["kubectl"] = time.monotonic()
        self.log(f"kubectl create of {len(docs)} took "
                 f"{self.times['kubectl'] - self.times['create']:.1f} s")

    def wait(self) -> None:
        """Until every BatchJob has ended or the timeout; disrupt and measure the steady state
        on the way, when asked."""
        n, deadline = len(self.names), self.times["create"] + self.args.timeout
        disrupted, steady, printed = False, not self.args.steady, 0.0
        running, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            counts = self.recorder.counts()
            if counts["running"] != running:
                running, since = counts["running"], time.monotonic()
            if not disrupted and self.args.disrupt and counts["ids"] >= n / 2:
                disrupted = True
                threading.Thread(target=self.disrupt, daemon=True).start()
            if (not steady and counts["created"] == n and counts["active"] == n
                    and (running == n or time.monotonic() - since >= STABLE)):
                steady = True
                self.results["steady"] = self.measure_steady()
                self.log(system_report.steady_line(self.results["steady"]))
            if counts["created"] == n and counts["ended"] == n:
                break
            if time.monotonic() >= printed + 5:
                printed = time.monotonic()
                self.log(f"created {counts['created']}/{n}, with ids {counts['ids']}, "
                         f"running {running}, succeeded {counts['succeeded']}, "
                         f"ended {counts['ended']}")
            time.sleep(0.2)
        self.times["waited"] = time.monotonic()
        self.cpu_after = self.cpu.sample()
        self.hooks_after = self.hooks()
        for mark, key in (("ids", "ids"), ("Succeeded", "complete")):
            t = self.recorder.last_reached(mark)
            if t is not None:
                self.times[key] = t
        self.log(f"done waiting: {dict(self.recorder.counts())}")

    def disrupt(self) -> None:
        self.times["disrupt"] = time.monotonic()
        self.log(f"disrupting: {self.args.disrupt}")
        done = subprocess.run(self.args.disrupt, shell=True, check=False)
        self.times["disrupted"] = time.monotonic()
        self.results["disruption"] = {"command": self.args.disrupt, "rc": done.returncode}
        self.log(f"disruption finished with exit status {done.returncode}")

    def measure_steady(self) -> dict[str, Any]:
        seconds = self.args.steady
        if self.args.settle:
            self.log(f"steady state: all active; settling for {self.args.settle:g} s")
            time.sleep(self.args.settle)
        self.log(f"steady state: measuring for {seconds:g} s")
        counts, api, hooks = self.recorder.counts(), self.kube.text("/metrics"), self.hooks()
        writes, cpu, started = self.recorder.batchjob_writes(), self.cpu.sample(), time.monotonic()
        time.sleep(seconds)
        api_after, hooks_after = self.kube.text("/metrics"), self.hooks()
        took, cpu_after = time.monotonic() - started, self.cpu.sample()
        remote = prometheus.grown(hooks, hooks_after, "hpcbridge_remote_commands_total", "verb")
        syncs = prometheus.grown(hooks, hooks_after, "hpcbridge_hook_requests_total", "hook")
        return {
            "seconds": took, "settled": self.args.settle,
            "running": [counts["running"], self.recorder.counts()["running"]],
            "active": counts["active"],
            "api_per_s": {k: v / took for k, v in
                          prometheus.api_requests(api, api_after).items()},
            "syncs_per_s": syncs["sync"] / took if hooks else None,
            "remote_per_s": ({**{k: v / took for k, v in remote.items()},
                              "total": sum(remote.values()) / took} if hooks else None),
            "batchjob_writes_per_s": (self.recorder.batchjob_writes() - writes) / took,
            "cpu_share": {name: (cpu_after[name] - cpu.get(name, 0.0)) / took
                          for name in cpu_after},
        }

    def scheduler_jobs(self) -> None:
        if self.args.cluster_env:
            counts = ClusterEnv(self.args.cluster_env).jobs_per_batchjob(self.recorder.uids(),
                                                                         self.started)
            per, source = {name: counts[name] for name in self.names}, "sacct"
        else:
            ids = self.recorder.job_ids()
            per, source = {name: len(ids.get(name, [])) for name in self.names}, "status.jobIDs"
        self.results["scheduler_jobs"] = {
            "source": source, "min": min(per.values()), "max": max(per.values()),
            "exceptions": {name: count for name, count in per.items() if count != 1}}

    def delete(self) -> None:
        """Every BatchJob, then (once all are gone) the Pods left and the namespace."""
        created = len(self.recorder.objects)
        self.times["delete"] = time.monotonic()
        self.kube.delete(self.api)
        printed = again = time.monotonic()
        while len(self.recorder.gone) < created:
            if time.monotonic() > self.times["delete"] + self.args.timeout:
                self.log(f"{created - len(self.recorder.gone)} BatchJobs still not gone")
                break
            if time.monotonic() >= printed + 5:
                printed = time.monotonic()
                self.log(f"deleting: {len(self.recorder.gone)}/{created} gone")
            if time.monotonic() >= again + 30:
                # A collection delete that outlasted the API server's timeout stopped there.
                again = time.monotonic()
                self.kube.delete(self.api)
            time.sleep(0.2)
        self.times["gone"] = time.monotonic()
        self.hooks_gone = self.hooks()
        self.kube.delete(f"/api/v1/namespaces/{self.namespace}/pods")
        self.kube.delete(f"/api/v1/namespaces/{self.namespace}")
        self.log(f"all gone after {self.times['gone'] - self.times['delete']:.1f} s; "
                 f"namespace {self.namespace} deleted (it may stay Terminating)")

    def abandon(self) -> None:
        """After a failure: delete what was created, without waiting for anything."""
        for path in (self.api, f"/api/v1/namespaces/{self.namespace}/pods",
                     f"/api/v1/namespaces/{self.namespace}"):
            try:
                self.kube.delete(path)
            except Exception as e:
                self.log(f"could not delete {path}: {e}")


def main(argv: list[str] | None = None) -> int:
    args = system_options.parse(argv, __doc__)
    try:
        kube = Kube()
    except KubeError as e:
        raise SystemExit(str(e)) from None
    run = Run(kube, args)
    try:
        run.create(run.prepare())
        run.wait()
        run.scheduler_jobs()
        if not args.keep:
            run.delete()
    except BaseException as e:
        if not args.keep:
            run.abandon()
        if isinstance(e, KubeError):
            raise SystemExit(str(e)) from None
        raise
    finally:
        run.stop.set()
        run.cpu.stop.set()
        kube.close()
    results = system_report.figures(run)
    command = "make bench-system BENCH_ARGS=" + shlex.quote(" ".join(map(shlex.quote, argv
                                                                          or sys.argv[1:])))
    print(system_report.save(results, REPO / args.out, command))
    if args.dump_writes:
        print(system_report.dump(run, args.dump_writes))
    return 0

if __name__ == "__main__":
    sys.exit(main())
