"""Dependencies through the whole system: one BatchJob (the dependency, a short job) and N that
name it in ``spec.dependsOn``, created by one ``kubectl create -f`` on the Kubernetes cluster
KUBECONFIG points at (with the CRD, Metacontroller and the hooks installed: nothing is brought up
here), in a fresh namespace whose BatchJobs are watched from before the create.

For each run it measures, per dependent, the time from the dependency's ``status.phase`` becoming
Succeeded to the dependent's ``status.jobIDs`` (both as the arrival of the watch event), and
from the dependency's ``status.completionTime`` to the dependent's ``status.submitTime`` (both
stored to the second); the hooks' syncs per BatchJob while the dependents wait (the hooks'
/metrics, read every --scrape seconds: the last reading before the Succeeded event), the
dependents' status writes meanwhile (the watch), and the syncs of the round that submits them.
Given the hook server's JSON log (HPCBRIDGE_LOG_FORMAT=json: one line per hook call, naming its
BatchJob), it also counts each BatchJob's own syncs and splits each dependent's wait into the
time until its submitting sync began at the hooks, that sync, and its status write reaching the
watch. Over that submitting round (Succeeded → the last job ids) it can also read
Metacontroller's /metrics (its sync queue's wait and work times, its API requests), the API
server's (its BatchJob status writes) and the CPU of named process trees and of the machine.
Then it deletes what the run created and waits until all of it is gone (finalizers), and at
the end deletes the namespace. Results go to stdout, to the ``dependencies-<label>`` section of
bench/results.md and to bench/out/dependencies-<label>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from bench import prometheus, report
from bench.cluster_env import ClusterEnv
from bench.cpu import TreeCPU
from bench.kube import Kube, KubeError, kubectl
from bench.writes import Recorder

REPO = Path(__file__).resolve().parent.parent
API = "/apis/hpcbridge.io/v1alpha1/namespaces/{}/batchjobs"
SECRET = "bench-login"
RUN_LABEL = "bench.hpcbridge.io/run"
TARGET = 2.0
"""Seconds within which every dependent should have its job ids once the dependency
Succeeded."""
ENDED = ("Succeeded", "Failed", "Cancelled")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WAITING = "WaitingForDependency"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--cluster-env", type=Path, metavar="FILE",
                       help="a SLURM cluster's env file (tests/clusters/slurm-up.sh's): the "
                            "login Secret and spec.cluster")
    where.add_argument("--batchcluster", metavar="NAME", help="spec.cluster.name")
    parser.add_argument("--secret", metavar="NAME", help="with --batchcluster: the login "
                        "Secret to copy from --secret-namespace")
    parser.add_argument("--secret-namespace", metavar="NS", default="default")
    parser.add_argument("--namespace-label", action="append", default=[], metavar="KEY=VALUE",
                        help="a label of the bench namespace, e.g. for a BatchCluster's "
                             "namespaceSelector (repeatable)")
    parser.add_argument("--backend", default="slurm")
    parser.add_argument("--dependents", type=int, default=1, metavar="N",
                        help="BatchJobs that depend on the one dependency (default 1)")
    parser.add_argument("--runs", type=int, default=1, metavar="R",
                        help="runs one after the other, each with a new dependency and new "
                             "dependents, deleted before the next")
    parser.add_argument("--dependency-seconds", type=float, default=5, metavar="S",
                        help="the dependency's script sleeps S seconds (default 5)")
    parser.add_argument("--dependent-seconds", type=float, default=0, metavar="S",
                        help="the dependents' scripts sleep S seconds (default: they run "
                             "`true`)")
    parser.add_argument("--hooks-metrics", metavar="URL",
                        help="the hooks' Prometheus endpoint, e.g. http://127.0.0.1:8080/metrics")
    parser.add_argument("--scrape", type=float, default=0.5, metavar="SECONDS",
                        help="how often the hooks' metrics are read while the dependents wait")
    parser.add_argument("--hooks-log", type=Path, metavar="FILE",
                        help="the hook server's log, written with HPCBRIDGE_LOG_FORMAT=json "
                             "(one line per hook call): syncs per BatchJob and the split of "
                             "each dependent's wait; read from where it ends when a run starts")
    parser.add_argument("--cpu", action="append", default=[], metavar="NAME=PID",
                        help="a process tree whose CPU to measure during the round that "
                             "submits the dependents (repeatable)")
    parser.add_argument("--metacontroller-metrics", metavar="URL",
                        help="Metacontroller's Prometheus endpoint (its --metrics-address): its "
                             "sync queue's wait and work times and its API requests during the "
                             "round that submits the dependents")
    parser.add_argument("--api-metrics", action="store_true",
                        help="read the API server's /metrics when the dependency Succeeded and "
                             "when the last dependent had job ids: its BatchJob status writes "
                             "in that round (the reading itself costs the API server some CPU "
                             "at the moment measured)")
    parser.add_argument("--timeout", type=float, default=600, metavar="S",
                        help="for the dependency to succeed, again for the dependents' job ids "
                             "and their ends, and again for the deletion")
    parser.add_argument("--no-wait-end", dest="wait_end", action="store_false",
                        help="delete the dependents once they have job ids, without waiting "
                             "for their jobs to end")
    parser.add_argument("--mc-args", default="", metavar="TEXT",
                        help="Metacontroller's version and flags, recorded with the figures")
    parser.add_argument("--dump-writes", action="store_true",
                        help="print every write of the dependent with the most status writes "
                             "while waiting, with what changed, for each run")
    parser.add_argument("--label", default="run")
    parser.add_argument("--keep", action="store_true",
                        help="leave the namespace and its BatchJobs as they are")
    parser.add_argument("--out", type=Path, default=Path("bench/results.md"))
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="the figures as JSON (default bench/out/dependencies-<label>.json)")
    args = parser.parse_args(argv)
    if args.dependents < 1 or args.runs < 1:
        parser.error("--dependents and --runs take positive numbers")
    if args.batchcluster and not args.secret:
        parser.error("--batchcluster needs --secret")
    if any("=" not in c or not c.split("=", 1)[1].isdigit() for c in args.cpu):
        parser.error("--cpu takes NAME=PID")
    if any("=" not in label for label in args.namespace_label):
        parser.error("--namespace-label takes KEY=VALUE")
    return args


# ------------------------------------------------------------------------------------ pure


def rfc3339(text: object) -> datetime.datetime | None:
    """A stored time (``2026-01-02T03:04:05Z``) or None."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def spread(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """Pure: the median, the max and the count of the values that are known."""
    known = [v for v in values if v is not None]
    if not known:
        return {"median": None, "max": None, "n": 0}
    return {"median": statistics.median(known), "max": max(known), "n": len(known)}


@dataclass(frozen=True)
class Call:
    """One hook call as the hook server's JSON log records it."""

    hook: str
    batchjob: str
    end: float
    """Wall-clock seconds (epoch) the call was answered."""
    seconds: float
    phase: str
    reason: str
    commands: tuple[str, ...]

    @property
    def start(self) -> float:
        return self.end - self.seconds


def read_calls(text: str) -> list[Call]:
    """Pure: the hook calls in a stretch of the hook server's JSON log (other lines skipped)."""
    calls = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("logger") != "hooks.calls":
            continue
        end = rfc3339(entry.get("time"))
        if end is None or not isinstance(entry.get("duration_ms"), int | float):
            continue
        calls.append(Call(str(entry.get("hook")), str(entry.get("batchjob")), end.timestamp(),
                          entry["duration_ms"] / 1000, str(entry.get("phase") or ""),
                          str(entry.get("reason") or ""),
                          tuple(str(c) for c in entry.get("remote_commands") or ())))
    return calls


def machine_busy() -> tuple[float, float]:
    """This machine's busy and total CPU seconds so far, all cores (/proc/stat)."""
    try:
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


def status_writes(before: str, after: str) -> dict[str, float]:
    """Pure: the API server's BatchJob status writes between two pages of its /metrics, their
    number and mean duration (``apiserver_request_duration_seconds``)."""
    def grown(name: str) -> float:
        total = 0.0
        for sign, text in ((-1, before), (1, after)):
            for labels, value in prometheus.samples(text, name):
                if (labels.get("resource") == "batchjobs" and labels.get("subresource") ==
                        "status" and labels.get("verb") in ("PUT", "PATCH", "APPLY")):
                    total += sign * value
        return total
    count = grown("apiserver_request_duration_seconds_count")
    seconds = grown("apiserver_request_duration_seconds_sum")
    return {"count": count, "mean_seconds": seconds / count if count else 0.0}


def controller_figures(before: str, after: str) -> dict[str, Any]:
    """Pure: between two pages of Metacontroller's /metrics, its CompositeControllers' sync
    queues (client-go's workqueue metrics): the items taken, their mean wait in the queue and
    mean time in a worker; and its requests to the API server by method."""
    def grown(name: str) -> float:
        total = 0.0
        for sign, text in ((-1, before), (1, after)):
            for labels, value in prometheus.samples(text, name):
                if labels.get("name", "").startswith("CompositeController-"):
                    total += sign * value
        return total
    taken = grown("workqueue_queue_duration_seconds_count")
    worked = grown("workqueue_work_duration_seconds_count")
    requests_by = prometheus.grown(before, after, "rest_client_requests_total", "method")
    return {
        "taken": taken,
        "queue_wait_seconds": grown("workqueue_queue_duration_seconds_sum") / taken
        if taken else None,
        "work_seconds": grown("workqueue_work_duration_seconds_sum") / worked if worked else None,
        "requests": {k: v for k, v in sorted(requests_by.items()) if v},
    }


def fmt(value: float | int | None, unit: str = " s", form: str = ".2f") -> str:
    if value is None:
        return "-"
    digits = int(form[1:-1]) if form[1:-1].isdigit() else 2
    return f"{round(value, digits) + 0.0:{form}}{unit}"  # never "-0.00"


# ------------------------------------------------------------------------------- the runs


class Scraper:
    """The hooks' /metrics, read every ``interval`` seconds in a thread while asked to."""

    def __init__(self, url: str | None, interval: float) -> None:
        self.url, self.interval = url, interval
        self.readings: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def read(self) -> str:
        return requests.get(self.url, timeout=10).text if self.url else ""

    def start(self) -> None:
        self.readings, self.stop = [], threading.Event()
        if self.url:
            self.thread = threading.Thread(target=self._loop, daemon=True, name="scrape")
            self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                text = self.read()
            except requests.RequestException:
                text = ""
            if text:
                with self.lock:
                    self.readings.append((time.monotonic(), text))
            self.stop.wait(self.interval)

    def halt(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=15)

    def before(self, t: float) -> str:
        """The last reading that arrived before monotonic time ``t``."""
        with self.lock:
            older = [text for when, text in self.readings if when < t]
        return older[-1] if older else ""


@dataclass
class Run:
    index: int
    dependency: str
    dependents: list[str]
    times: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)
    api: dict[str, str] = field(default_factory=dict)
    controller: dict[str, str] = field(default_factory=dict)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Bench:
    """The namespace, its watch, and the runs one after the other."""

    def __init__(self, kube: Kube, args: argparse.Namespace) -> None:
        self.kube, self.args = kube, args
        self.namespace = f"hpcbridge-deps-{secrets.token_hex(3)}"
        self.api = API.format(self.namespace)
        self.recorder = Recorder()
        self.stop = threading.Event()
        self.scraper = Scraper(args.hooks_metrics, args.scrape)
        roots = {n: int(p) for n, p in (c.split("=", 1) for c in args.cpu)}
        if roots:
            roots["this benchmark"] = os.getpid()
        self.cpu = TreeCPU(roots)
        self.wall = time.time() - time.monotonic()
        """Added to a monotonic time: the wall clock's (for the hooks' log and stored times)."""
        self.statuses: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        """Every status each BatchJob was seen with, and when (monotonic)."""
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.spec: dict[str, Any] = {}

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:7.1f} s] {text}", flush=True)

    def on_batchjob(self, kind: str, obj: dict[str, Any], t: float) -> None:
        self.recorder.batchjob(kind, obj, t)
        name = obj.get("metadata", {}).get("name")
        if kind in ("ADDED", "MODIFIED") and name:
            with self.lock:
                self.statuses.setdefault(name, []).append((t, obj.get("status") or {}))

    def prepare(self) -> None:
        ns, args = self.namespace, self.args
        labels = dict(label.split("=", 1) for label in args.namespace_label)
        self.kube.post("/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})
        # Where no controller-manager makes it, the log Pods need the default ServiceAccount.
        self.kube.post(f"/api/v1/namespaces/{ns}/serviceaccounts",
                       {"metadata": {"name": "default"}}, ok=(409,))
        if args.cluster_env:
            env = ClusterEnv(args.cluster_env)
            secret, self.spec = env.secret(SECRET), env.spec(SECRET)
        else:
            source = self.kube.get(f"/api/v1/namespaces/{args.secret_namespace}"
                                   f"/secrets/{args.secret}")
            secret = {"type": source.get("type", "Opaque"), "data": source.get("data", {}),
                      "metadata": {"name": args.secret}}
            self.spec = {"cluster": {"name": args.batchcluster,
                                     "secretRef": {"name": args.secret}}}
        self.kube.post(f"/api/v1/namespaces/{ns}/secrets", secret)
        self.kube.watch(self.api, self.on_batchjob, self.stop)
        self.log(f"namespace {ns} ready, watch started")

    # ------------------------------------------------------------------ one run
    def document(self, name: str, run: int, seconds: float,
                 depends_on: str | None) -> dict[str, Any]:
        script = f"#!/bin/bash\nsleep {seconds:g}\n" if seconds else "#!/bin/bash\ntrue\n"
        spec: dict[str, Any] = {"backend": self.args.backend, "script": script, **self.spec}
        if depends_on:
            spec["dependsOn"] = [{"name": depends_on, "condition": "Succeeded"}]
        return {"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
                "metadata": {"name": name, "namespace": self.namespace,
                             "labels": {RUN_LABEL: str(run)}},
                "spec": spec}

    def reached(self, name: str, mark: str) -> float | None:
        with self.recorder.lock:
            return self.recorder.reached.get(name, {}).get(mark)

    def phase(self, name: str) -> str:
        with self.recorder.lock:
            return str((self.recorder.objects.get(name, {}).get("status") or {}).get("phase", ""))

    def run(self, index: int) -> Run:
        args = self.args
        run = Run(index, f"r{index}-dependency",
                  [f"r{index}-dependent-{i:03d}" for i in range(args.dependents)])
        docs = [self.document(run.dependency, index, args.dependency_seconds, None)]
        docs += [self.document(name, index, args.dependent_seconds, run.dependency)
                 for name in run.dependents]
        offset = args.hooks_log.stat().st_size if args.hooks_log else 0
        run.metrics["before"] = self.scraper.read()
        self.scraper.start()
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            file.write("\n".join(json.dumps(doc) for doc in docs))
            file.flush()
            run.times["create"] = time.monotonic()
            kubectl("create", "-f", file.name, "-o", "name")
            run.times["kubectl"] = time.monotonic()
        self.log(f"run {index}: created the dependency and {len(run.dependents)} dependents in "
                 f"{run.times['kubectl'] - run.times['create']:.1f} s")
        try:
            self.wait_for_dependency(run)
            if "succeeded" in run.times:
                self.wait_for_dependents(run)
        finally:
            self.scraper.halt()
        run.metrics["after"] = self.scraper.read()
        if args.wait_end and "succeeded" in run.times:
            self.wait_for_ends(run)
        if args.hooks_log:
            with args.hooks_log.open("rb") as log:
                log.seek(offset)
                run.calls = read_calls(log.read().decode(errors="replace"))
        if not args.keep:
            self.delete(run)
        return run

    def wait_for_dependency(self, run: Run) -> None:
        deadline, printed = run.times["create"] + self.args.timeout, time.monotonic()
        while time.monotonic() < deadline:
            t = self.reached(run.dependency, "Succeeded")
            if t is not None:
                run.times["succeeded"] = t
                self.sample(run, "succeeded")
                run.metrics["waiting"] = self.scraper.before(t)
                self.log(f"run {run.index}: the dependency Succeeded "
                         f"{t - run.times['create']:.1f} s after the create began")
                return
            phase = self.phase(run.dependency)
            if phase in ("Failed", "Cancelled"):
                run.notes.append(f"the dependency ended {phase}")
                self.log(f"run {run.index}: the dependency ended {phase}: no measurement")
                return
            if time.monotonic() >= printed + 5:
                printed = time.monotonic()
                self.log(f"run {run.index}: dependency {phase or 'not synced yet'}; dependents "
                         f"waiting: {self.count_waiting(run)}/{len(run.dependents)}")
            time.sleep(0.02)
        run.notes.append("the dependency did not succeed within --timeout")

    def sample(self, run: Run, mark: str) -> None:
        """The CPU used so far (named trees, the machine) and the API server's metrics."""
        busy, total = machine_busy()
        run.cpu[mark] = {**self.cpu.sample(), "machine busy": busy, "machine total": total,
                         "at": time.monotonic()}
        if self.args.metacontroller_metrics:
            try:
                run.controller[mark] = requests.get(self.args.metacontroller_metrics,
                                                    timeout=10).text
            except requests.RequestException:
                run.controller[mark] = ""
        if self.args.api_metrics:
            try:
                run.api[mark] = self.kube.text("/metrics")
            except (KubeError, requests.RequestException):
                run.api[mark] = ""

    def count_waiting(self, run: Run) -> int:
        with self.recorder.lock:
            objects = [self.recorder.objects.get(n) or {} for n in run.dependents]
        return sum((o.get("status") or {}).get("reason") == WAITING for o in objects)

    def wait_for_dependents(self, run: Run) -> None:
        deadline = run.times["succeeded"] + self.args.timeout
        while time.monotonic() < deadline:
            missing = [n for n in run.dependents if self.reached(n, "ids") is None
                       and self.phase(n) not in ENDED]
            if not missing:
                break
            time.sleep(0.05)
        self.sample(run, "ids")
        times = [self.reached(n, "ids") for n in run.dependents]
        if all(t is not None for t in times):
            run.times["all_ids"] = max(t for t in times if t is not None)
        else:
            run.notes.append(f"{sum(t is None for t in times)} dependents got no job ids")
        self.log(f"run {run.index}: {sum(t is not None for t in times)}/{len(times)} "
                 "dependents have job ids")

    def wait_for_ends(self, run: Run) -> None:
        deadline = time.monotonic() + self.args.timeout
        while time.monotonic() < deadline:
            if all(self.phase(n) in ENDED for n in run.dependents):
                return
            time.sleep(0.2)
        run.notes.append("not every dependent ended within --timeout")

    def delete(self, run: Run) -> None:
        names = {run.dependency, *run.dependents}
        path = f"{self.api}?labelSelector={RUN_LABEL}%3D{run.index}"
        start = again = printed = time.monotonic()
        self.kube.delete(path)
        while not names <= self.recorder.gone:
            if time.monotonic() > start + self.args.timeout:
                run.notes.append(f"{len(names - self.recorder.gone)} BatchJobs not gone "
                                 "within --timeout")
                break
            if time.monotonic() >= again + 30:
                # A collection delete that outlasted the API server's timeout stopped there.
                again = time.monotonic()
                self.kube.delete(path)
            if time.monotonic() >= printed + 5:
                printed = time.monotonic()
                self.log(f"run {run.index}: deleting, {len(names & self.recorder.gone)}/"
                         f"{len(names)} gone")
            time.sleep(0.1)
        run.times["gone"] = time.monotonic()
        self.log(f"run {run.index}: all gone {run.times['gone'] - start:.1f} s after the delete")

    def finish(self) -> None:
        self.kube.delete(f"/api/v1/namespaces/{self.namespace}/pods")
        self.kube.delete(f"/api/v1/namespaces/{self.namespace}")
        self.log(f"namespace {self.namespace} deleted (it may stay Terminating)")

    def abandon(self) -> None:
        """After a failure: delete what was created, without waiting for anything."""
        for path in (self.api, f"/api/v1/namespaces/{self.namespace}/pods",
                     f"/api/v1/namespaces/{self.namespace}"):
            try:
                self.kube.delete(path)
            except Exception as e:
                self.log(f"could not delete {path}: {e}")

    # ------------------------------------------------------------------ figures
    def figures(self, run: Run) -> dict[str, Any]:
        """One run's figures, JSON-ready."""
        times, n = run.times, len(run.dependents)
        out: dict[str, Any] = {"run": run.index, "dependents": n, "notes": run.notes,
                               "kubectl_seconds": times["kubectl"] - times["create"]}
        succeeded = times.get("succeeded")
        if succeeded is None:
            return out
        out["succeeded_after_create"] = succeeded - times["create"]
        out["succeeded_at"] = datetime.datetime.fromtimestamp(
            succeeded + self.wall, datetime.UTC).isoformat(timespec="milliseconds")
        with self.recorder.lock:
            objects = {name: dict(obj) for name, obj in self.recorder.objects.items()}
            writes = {name: list(ws) for name, ws in self.recorder.writes.items()}
        with self.lock:
            statuses = {name: list(seen) for name, seen in self.statuses.items()}
        dep_status = objects.get(run.dependency, {}).get("status") or {}
        completion = rfc3339(dep_status.get("completionTime"))
        per: dict[str, dict[str, Any]] = {}
        for name in run.dependents:
            status = objects.get(name, {}).get("status") or {}
            ids = self.reached(name, "ids")
            submit = rfc3339(status.get("submitTime"))
            waiting = [t for t, s in statuses.get(name, []) if s.get("reason") == WAITING]
            before = [w for w in writes.get(name, []) if w.t < succeeded]
            per[name] = {
                "to_ids": None if ids is None else ids - succeeded,
                "completion_to_submit": (submit - completion).total_seconds()
                if submit and completion else None,
                "waiting_from": None if not waiting else waiting[0] - times["create"],
                "status_writes_waiting": sum(w.what == "status" for w in before),
                "writes_waiting": sum(1 for w in before if w.column),
                "job_ids": status.get("jobIDs") or [],
            }
        out["per_dependent"] = per
        out["to_ids"] = spread(p["to_ids"] for p in per.values())
        out["completion_to_submit"] = spread(p["completion_to_submit"] for p in per.values())
        out["within_target"] = sum(p["to_ids"] is not None and p["to_ids"] <= TARGET
                                   for p in per.values())
        starts = [p["waiting_from"] for p in per.values() if p["waiting_from"] is not None]
        out["last_waiting_after_create"] = max(starts) if len(starts) == n else None
        out["status_writes_waiting"] = spread(p["status_writes_waiting"] for p in per.values())
        out["status_writes_waiting"]["mean"] = statistics.mean(
            p["status_writes_waiting"] for p in per.values())
        running = self.reached(run.dependency, "Running")
        out["dependency"] = {"completionTime": dep_status.get("completionTime"),
                             "jobIDs": dep_status.get("jobIDs") or [],
                             "running_to_succeeded": None if running is None
                             else succeeded - running}
        if "ids" in run.cpu:
            out["round"] = self.round_figures(run)
        if run.metrics.get("before"):
            out["metrics"] = self.metric_figures(run, n)
        if run.calls:
            out["hooks_log"] = self.log_figures(run, per)
        return out

    def round_figures(self, run: Run) -> dict[str, Any]:
        """From the Succeeded event until every dependent had job ids (or the wait ended):
        CPU shares and the API server's BatchJob status writes."""
        start, end = run.cpu["succeeded"], run.cpu["ids"]
        took = end["at"] - start["at"]
        shares = {name: (end[name] - start[name]) / took for name in end
                  if name not in ("at", "machine busy", "machine total") and took > 0}
        total = end["machine total"] - start["machine total"]
        busy = (end["machine busy"] - start["machine busy"]) / total if total else None
        cores = os.cpu_count() or 1
        others = None if busy is None or not shares else busy * cores - sum(shares.values())
        out: dict[str, Any] = {"seconds": took, "cpu_share": shares, "machine_busy": busy,
                               "cores": cores, "others": others}
        if run.api.get("succeeded") and run.api.get("ids"):
            out["status_writes"] = status_writes(run.api["succeeded"], run.api["ids"])
        if run.controller.get("succeeded") and run.controller.get("ids"):
            out["metacontroller"] = controller_figures(run.controller["succeeded"],
                                                       run.controller["ids"])
        return out

    def dump(self, run: Run, figure: dict[str, Any]) -> str:
        """Every write of the run's dependent that wrote its status most while waiting, in
        order, with what changed, from its creation on."""
        per = figure.get("per_dependent") or {}
        if not per:
            return f"run {run.index}: nothing measured"
        name = max(per, key=lambda n: (per[n]["status_writes_waiting"], n))
        with self.recorder.lock:
            writes = sorted(self.recorder.writes.get(name, []), key=lambda w: w.t)
        lines = [f"run {run.index}: writes of {name} (seconds after the create began; the "
                 f"dependency Succeeded at {run.times['succeeded'] - run.times['create']:.2f})"]
        for w in writes:
            lines.append(f"{w.t - run.times['create']:8.2f}  {w.kind} {w.what} {w.name}")
            lines += [f"            {change}" for change in w.changes]
        return "\n".join(lines)

    def metric_figures(self, run: Run, n: int) -> dict[str, Any]:
        before, waiting, after = (run.metrics["before"], run.metrics.get("waiting", ""),
                                  run.metrics["after"])
        figures: dict[str, Any] = {}
        if waiting:
            syncs = prometheus.grown(before, waiting, "hpcbridge_hook_requests_total", "hook")
            figures["waiting"] = {"syncs": syncs["sync"], "customize": syncs["customize"],
                                  "syncs_per_batchjob": syncs["sync"] / (n + 1)}
            round_syncs = prometheus.grown(waiting, after, "hpcbridge_hook_requests_total",
                                           "hook")
            total = prometheus.grown(waiting, after, "hpcbridge_hook_duration_seconds_sum",
                                     "hook")
            count = prometheus.grown(waiting, after, "hpcbridge_hook_duration_seconds_count",
                                     "hook")
            figures["round"] = {"syncs": round_syncs["sync"],
                                "syncs_per_dependent": round_syncs["sync"] / n,
                                "mean_sync_seconds": total["sync"] / count["sync"]
                                if count["sync"] else None}
        remote = prometheus.grown(before, after, "hpcbridge_remote_commands_total", "verb")
        figures["remote_commands"] = {k: v for k, v in sorted(remote.items()) if v}
        return figures

    def log_figures(self, run: Run, per: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """From the hook server's log: syncs per BatchJob while waiting, and the split of each
        dependent's wait for its job ids."""
        succeeded = run.times["succeeded"] + self.wall
        namespace = self.namespace + "/"
        syncs = [c for c in run.calls if c.hook == "sync" and c.batchjob.startswith(namespace)]
        mine = {name: [c for c in syncs if c.batchjob == namespace + name]
                for name in [run.dependency, *run.dependents]}
        waiting = {name: sum(c.end < succeeded for c in calls) for name, calls in mine.items()}
        split: dict[str, list[float | None]] = {"trigger": [], "sync": [], "write": []}
        rounds: list[int] = []
        for name in run.dependents:
            submitting = next((c for c in mine[name] if c.reason != WAITING
                               and c.end >= succeeded - 1), None)
            ids = per[name]["to_ids"]
            rounds.append(sum(1 for c in mine[name] if c.end >= succeeded - 1
                              and (ids is None or c.start <= succeeded + ids)))
            if submitting is None:
                continue
            split["trigger"].append(submitting.start - succeeded)
            split["sync"].append(submitting.seconds)
            split["write"].append(None if ids is None else succeeded + ids - submitting.end)
        dependents = [waiting[name] for name in run.dependents]
        return {
            "dependency_syncs_waiting": waiting[run.dependency],
            "dependent_syncs_waiting": {"mean": statistics.mean(dependents),
                                        "max": max(dependents), "min": min(dependents)},
            "syncs_to_submit": {"mean": statistics.mean(rounds), "max": max(rounds)},
            "split": {k: spread(v) for k, v in split.items()},
        }


# --------------------------------------------------------------------------------- report


def render(results: dict[str, Any], command: str) -> str:
    a, runs = results["args"], [r for r in results["runs"] if "to_ids" in r]
    n = a["dependents"]
    dep = f"`sleep {a['dependency_seconds']:g}`"
    mine = f"`sleep {a['dependent_seconds']:g}`" if a["dependent_seconds"] else "`true`"
    lines = [
        f"## Dependencies: {n} dependent{'s' if n > 1 else ''} of one BatchJob through the API "
        f"server, Metacontroller and the hooks ({results['label']})", "",
        results["machine"],
        f"- command: `{command}`",
        f"- Metacontroller: {a['mc_args'] or 'not given'}",
        f"- cluster: {results['cluster']} ({a['backend']}); the dependency runs {dep}, each "
        f"dependent {mine} with `dependsOn: [{{name: <the dependency>, condition: Succeeded}}]`; "
        f"all created by one `kubectl create -f`, the dependency first; {len(results['runs'])} "
        "run(s), each deleted (and gone) before the next", "",
        "| run | dependency Succeeded after create | all dependents waiting after create | "
        "Succeeded → job ids: median | max | within 2 s | completionTime → submitTime: median "
        "| max | syncs per BatchJob while waiting | status writes per dependent while waiting "
        "(mean / max) | syncs from Succeeded to the last job ids, per dependent |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        m = r.get("metrics", {})
        waiting = m.get("waiting", {}).get("syncs_per_batchjob")
        rounds = m.get("round", {}).get("syncs_per_dependent")
        w = r["status_writes_waiting"]
        lines.append(
            f"| {r['run']} | {fmt(r['succeeded_after_create'], form='.1f')} | "
            f"{fmt(r['last_waiting_after_create'], form='.1f')} | "
            f"{fmt(r['to_ids']['median'])} | {fmt(r['to_ids']['max'])} | "
            f"{r['within_target']}/{r['dependents']} | "
            f"{fmt(r['completion_to_submit']['median'], form='.0f')} | "
            f"{fmt(r['completion_to_submit']['max'], form='.0f')} | "
            f"{fmt(waiting, '')} | {w['mean']:.2f} / {w['max']} | {fmt(rounds, '')} |")
    pooled = results["pooled"]
    lines += [
        "", f"- all runs: Succeeded → job ids median {fmt(pooled['to_ids']['median'])}, max "
        f"{fmt(pooled['to_ids']['max'])} over {pooled['to_ids']['n']} dependents; "
        f"{pooled['within_target']} of them within {TARGET:g} s; completionTime → submitTime "
        f"(stored to the second) median {fmt(pooled['completion_to_submit']['median'], form='.0f')}"
        f", max {fmt(pooled['completion_to_submit']['max'], form='.0f')}",
        "- Succeeded → job ids: from the arrival of the watch event in which the dependency's "
        "phase is Succeeded to the arrival of the one in which the dependent has status.jobIDs. "
        "Syncs while waiting: the hooks' `hpcbridge_hook_requests_total{hook=\"sync\"}` from "
        "before the create to the last reading before the Succeeded event, over the dependency "
        "and its dependents; syncs from Succeeded to the last job ids: from that reading "
        "until every dependent had its job ids, of every BatchJob of the run (the "
        "dependency's included), per dependent. "
        "Status writes as the watch saw them (creation excluded).",
    ]
    logged = [r for r in runs if "hooks_log" in r]
    if logged:
        lines += [
            "", "From the hook server's log (one line per hook call, its end and duration), "
            "each dependent's wait for its job ids split into: until its submitting sync began "
            "at the hooks (Metacontroller saw the change, queued the dependent and called; "
            "below zero when Metacontroller had the change before the benchmark's watch), "
            "the sync itself (the submission over SSH included), and from its answer to the "
            "watch event with the job ids (Metacontroller's status write):", "",
            "| run | until the sync began: median | max | the sync: median | max | answer → "
            "watch: median | max | the dependency's syncs while waiting | each dependent's "
            "syncs while waiting (mean / max) | each dependent's syncs to submit (mean / max) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in logged:
            h, s = r["hooks_log"], r["hooks_log"]["split"]
            d, k = h["dependent_syncs_waiting"], h["syncs_to_submit"]
            lines.append(
                f"| {r['run']} | {fmt(s['trigger']['median'])} | {fmt(s['trigger']['max'])} | "
                f"{fmt(s['sync']['median'])} | {fmt(s['sync']['max'])} | "
                f"{fmt(s['write']['median'])} | {fmt(s['write']['max'])} | "
                f"{h['dependency_syncs_waiting']} | {d['mean']:.2f} / {d['max']} | "
                f"{k['mean']:.2f} / {k['max']} |")
    lines.append("")
    for r in runs:
        if "round" not in r:
            continue
        rd = r["round"]
        parts = [f"run {r['run']}: {rd['seconds']:.1f} s"]
        if rd["seconds"] >= 1:  # CPU shares over a shorter time say little
            if rd["machine_busy"] is not None:
                parts.append(f"this machine's {rd['cores']} cores {rd['machine_busy']:.0%} busy")
            parts += [f"{name} {share:.0%} of one core"
                      for name, share in rd["cpu_share"].items()]
            if rd.get("others") is not None:
                parts.append(f"every other process {max(0.0, rd['others']):.0%} of one core")
        if len(parts) == 1 and "status_writes" not in rd and "metacontroller" not in rd:
            continue
        if "status_writes" in rd:
            sw = rd["status_writes"]
            parts.append(f"{sw['count']:.0f} BatchJob status writes at the API server, "
                         f"{1000 * sw['mean_seconds']:.0f} ms each on average")
        if "metacontroller" in rd:
            mc = rd["metacontroller"]
            calls = ", ".join(f"{k} {v:.0f}" for k, v in mc["requests"].items())
            parts.append(f"Metacontroller's sync queue: {mc['taken']:.0f} taken, after "
                         f"{fmt(mc['queue_wait_seconds'])} in it on average, then "
                         f"{fmt(mc['work_seconds'])} in a worker; its API requests: "
                         f"{calls or 'none'}")
        lines.append("- the submitting round (Succeeded → the last job ids), " + "; ".join(parts))
    remote: dict[str, float] = {}
    for r in runs:
        for verb, count in r.get("metrics", {}).get("remote_commands", {}).items():
            remote[verb] = remote.get(verb, 0) + count
    if remote:
        lines.append("- remote commands over all runs: " + ", ".join(
            f"{verb} {count:.0f}" for verb, count in sorted(remote.items())))
    notes = [f"run {r['run']}: {note}" for r in results["runs"] for note in r["notes"]]
    if notes:
        lines.append("- notes: " + "; ".join(notes))
    if results["watch_gaps"]:
        lines.append(f"- the watch lost events (figures incomplete): {results['watch_gaps']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        kube = Kube()
    except KubeError as e:
        raise SystemExit(str(e)) from None
    bench = Bench(kube, args)
    runs: list[Run] = []
    try:
        bench.prepare()
        for index in range(1, args.runs + 1):
            runs.append(bench.run(index))
        if not args.keep:
            bench.finish()
    except BaseException as e:
        if not args.keep:
            bench.abandon()
        if isinstance(e, KubeError):
            raise SystemExit(str(e)) from None
        raise
    finally:
        bench.stop.set()
        bench.scraper.halt()
        bench.cpu.stop.set()
        kube.close()
    figures = [bench.figures(run) for run in runs]
    if args.dump_writes:
        for run, figure in zip(runs, figures, strict=True):
            print(bench.dump(run, figure))
    measured = [f for f in figures if "per_dependent" in f]
    everyone = [p for f in measured for p in f["per_dependent"].values()]
    results: dict[str, Any] = {
        "label": args.label, "machine": report.machine(), "namespace": bench.namespace,
        "cluster": str(args.cluster_env or "") or f"BatchCluster {args.batchcluster}",
        "args": {"dependents": args.dependents, "runs": args.runs,
                 "dependency_seconds": args.dependency_seconds,
                 "dependent_seconds": args.dependent_seconds, "backend": args.backend,
                 "mc_args": args.mc_args.strip()},
        "runs": figures,
        "pooled": {"to_ids": spread(p["to_ids"] for p in everyone),
                   "completion_to_submit": spread(p["completion_to_submit"] for p in everyone),
                   "within_target": sum(p["to_ids"] is not None and p["to_ids"] <= TARGET
                                        for p in everyone)},
        "watch_gaps": list(bench.recorder.gaps),
    }
    command = "make bench-dependencies BENCH_ARGS=" + shlex.quote(
        " ".join(map(shlex.quote, argv if argv is not None else sys.argv[1:])))
    text = render(results, command)
    report.update(REPO / args.out, f"dependencies-{args.label}", text)
    out = REPO / (args.json or Path(f"bench/out/dependencies-{args.label}.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**results, "command": command}, indent=1) + "\n")
    print(text)
    return 0 if measured and all(f.get("to_ids", {}).get("n") == f["dependents"]
                                 for f in measured) else 1


if __name__ == "__main__":
    sys.exit(main())
