"""The system benchmark's figures, taken from one run's timeline, watches and metrics, and
written as the ``system-<label>`` section of the results file and as a JSON file beside it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import prometheus, report
from bench.writes import COLUMNS, spread

if TYPE_CHECKING:
    from bench.system import Run


def since(times: dict[str, float], start: str, end: str) -> float | None:
    return times[end] - times[start] if start in times and end in times else None


def phase(status: dict[str, Any]) -> str:
    """A BatchJob's phase, with its reason when it has one."""
    reason = status.get("reason")
    return str(status.get("phase", "-")) + (f" ({reason})" if reason else "")


def figures(run: Run) -> dict[str, Any]:
    """Every figure the report gives, from the finished run, as JSON-ready data."""
    times, n, recorder = dict(run.times), len(run.names), run.recorder
    if recorder.added:
        times["first"], times["last"] = min(recorder.added.values()), max(recorder.added.values())
    end = times.get("gone", times["waited"])
    life = recorder.per_batchjob(run.names, times["create"], end)
    running = recorder.per_batchjob(run.names, times["create"], times["waited"])
    hooks = prometheus.grown(run.hooks_before, run.hooks_after,
                             "hpcbridge_hook_requests_total", "hook")
    status_writes = sum(c["status"] for c in running.values())
    window = times["waited"] - times["create"]
    results: dict[str, Any] = {
        **run.results,
        "label": run.args.label, "machine": report.machine(), "namespace": run.namespace,
        "n": n, "backend": run.args.backend, "script_seconds": run.args.script_seconds,
        "mc_args": run.args.mc_args.strip(), "cluster": (str(run.args.cluster_env or "")
                                                 or f"BatchCluster {run.args.batchcluster}"),
        "kubectl_seconds": since(times, "create", "kubectl"),
        "creation_seconds": since(times, "first", "last"),
        "to_ids": since(times, "last", "ids"), "to_complete": since(times, "last", "complete"),
        "from_create_to_ids": since(times, "create", "ids"),
        "from_create_to_complete": since(times, "create", "complete"),
        "phases": dict(Counter(phase(o.get("status") or {}) for o in recorder.objects.values())),
        "writes": spread(life),
        "status_writes": dict(sorted(Counter(c["status"] for c in life.values()).items())),
        "syncs_per_batchjob": hooks["sync"] / n if run.hooks_before else None,
        "syncs_without_status_write_per_batchjob": ((hooks["sync"] - status_writes) / n
                                                    if run.hooks_before else None),
        "cpu": {name: {"seconds": run.cpu_after[name] - run.cpu_before[name],
                       "percent": 100 * (run.cpu_after[name] - run.cpu_before[name]) / window}
                for name in run.cpu_after},
        "cpu_window_seconds": window, "watch_gaps": list(recorder.gaps),
    }
    if "disrupt" in times:
        results["disruption"] = {**results.get("disruption", {}),
                                 "after_create": since(times, "create", "disrupt"),
                                 "seconds": since(times, "disrupt", "disrupted")}
    if "delete" in times:
        deleting = recorder.per_batchjob(run.names, times["delete"], times["gone"])
        calls = prometheus.grown(run.hooks_after, run.hooks_gone,
                                 "hpcbridge_hook_requests_total", "hook")
        results["deletion"] = {
            "seconds": since(times, "delete", "gone"), "writes": spread(deleting),
            "syncs_per_batchjob": calls["sync"] / n if run.hooks_gone else None,
            "finalize_per_batchjob": calls["finalize"] / n if run.hooks_gone else None}
    return results


def seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f} s"


def rate(n: int, value: float | None) -> str:
    return "-" if not value else f"{n / value:.1f}"


def writes_table(results: dict[str, Any]) -> list[str]:
    columns = [*COLUMNS, "total"]
    rows = [("mean", results["writes"], "mean", ".2f"), ("max", results["writes"], "max", ".0f")]
    if results.get("deletion", {}).get("writes"):
        rows.append(("of which during deletion (mean)", results["deletion"]["writes"], "mean",
                     ".2f"))
    lines = ["| per BatchJob | " + " | ".join(columns) + " |",
             "| --- |" + " --- |" * len(columns)]
    for title, table, key, form in rows:
        lines.append(f"| {title} | " + " | ".join(format(table[c][key], form) for c in columns)
                     + " |")
    return lines


def steady_line(s: dict[str, Any]) -> str:
    api = s["api_per_s"]
    line = (f"- steady state over {s['seconds']:.0f} s ({s['settled']:g} s after all were "
            f"active), {s['active']} BatchJobs active "
            f"(Running: {s['running'][0]} → {s['running'][1]}): API server "
            f"{api['total']:.1f} requests/s ({api['write']:.1f} writes, {api['read']:.1f} "
            f"reads, {api['watch']:.2f} watches); BatchJob writes "
            f"{s['batchjob_writes_per_s']:.2f}/s")
    if s["syncs_per_s"] is not None:
        verbs = ", ".join(f"{k} {v:.2f}" for k, v in sorted(s["remote_per_s"].items())
                          if k != "total" and v)
        line += (f"; hook syncs {s['syncs_per_s']:.1f}/s; remote commands "
                 f"{s['remote_per_s']['total']:.2f}/s" + (f" ({verbs})" if verbs else ""))
    shares = ", ".join(f"{name} {share:.0%}" for name, share in s.get("cpu_share", {}).items())
    return line + (f"; CPU (of one core): {shares}" if shares else "")


def render(r: dict[str, Any], command: str) -> str:
    n = r["n"]
    script = f"`sleep {r['script_seconds']:g}`" if r["script_seconds"] else "`true`"
    flags = f"`{r['mc_args']}`" if r["mc_args"] else "flags not given"
    lines = [
        f"## System: {n} BatchJobs through the API server, Metacontroller, the hooks and the "
        f"scheduler ({r['label']})", "",
        r["machine"],
        f"- command: `{command}`",
        f"- Metacontroller: {flags}",
        f"- cluster: {r['cluster']} ({r['backend']}); script {script}; one `kubectl create -f` "
        f"of {n} documents", "",
        "| N | kubectl create | first → last created | to all job ids | to all Succeeded | "
        "BatchJobs/s to ids | BatchJobs/s to Succeeded |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {n} | {seconds(r['kubectl_seconds'])} | {seconds(r['creation_seconds'])} | "
        f"{seconds(r['to_ids'])} | {seconds(r['to_complete'])} | "
        f"{rate(n, r['from_create_to_ids'])} | {rate(n, r['from_create_to_complete'])} |", "",
        "Times to all job ids and to all Succeeded count from the moment the last BatchJob "
        "existed; BatchJobs per second from the start of `kubectl create`. Writes as the "
        "watches saw them (an update that changes nothing is not stored and not counted), "
        "from creation until the BatchJob is gone; metadata writes include the delete (its "
        "deletionTimestamp) and the removal of the last finalizer:", "",
        *writes_table(r), "",
        "- BatchJobs by their number of status writes: " + ", ".join(
            f"{k} writes: {count}" for k, count in r["status_writes"].items()),
        "- end phases: " + ", ".join(f"{k} {v}" for k, v in sorted(r["phases"].items())),
    ]
    if r["syncs_per_batchjob"] is not None:
        lines.append(f"- hook syncs per BatchJob (create → all ended): "
                     f"{r['syncs_per_batchjob']:.2f}; syncs without a status write: "
                     f"{r['syncs_without_status_write_per_batchjob']:.2f} per BatchJob")
    jobs = r["scheduler_jobs"]
    exceptions = ", ".join(f"{k}: {v}" for k, v in sorted(jobs["exceptions"].items())[:20])
    lines.append(f"- scheduler jobs per BatchJob ({jobs['source']}): min {jobs['min']}, "
                 f"max {jobs['max']}" + (f"; not 1: {exceptions}" if exceptions else ""))
    for name, cpu in r["cpu"].items():
        lines.append(f"- CPU of {name} and its descendants (create → all ended, "
                     f"{r['cpu_window_seconds']:.0f} s): {cpu['seconds']:.1f} s, "
                     f"{cpu['percent']:.0f} % of one core")
    if "steady" in r:
        lines.append(steady_line(r["steady"]))
    if "disruption" in r:
        d = r["disruption"]
        lines.append(f"- disruption: `{d.get('command')}` {seconds(d['after_create'])} "
                     f"after the create began, took {seconds(d['seconds'])}, exit "
                     f"status {d.get('rc', 'unknown')}")
    if "deletion" in r:
        d = r["deletion"]
        calls = (f"; {d['syncs_per_batchjob']:.2f} syncs and {d['finalize_per_batchjob']:.2f} "
                 "finalize calls per BatchJob" if d["syncs_per_batchjob"] is not None else "")
        lines.append(f"- deletion: all gone {seconds(d['seconds'])} after the delete{calls}")
    if r["watch_gaps"]:
        lines.append(f"- watches that lost events (figures incomplete): {r['watch_gaps']}")
    return "\n".join(lines) + "\n"


def save(results: dict[str, Any], path: Path, command: str) -> str:
    """Write the section and the JSON file beside ``path``; the section's text."""
    text = render(results, command)
    report.update(path, f"system-{results['label']}", text)
    path.with_name(f"system-{results['label']}.json").write_text(
        json.dumps({**results, "command": command}, indent=1) + "\n")
    return text


def dump(run: Run, name: str) -> str:
    """Every write of BatchJob ``name`` in order, with what changed, from its creation on."""
    with run.recorder.lock:
        writes = sorted(run.recorder.writes.get(name, []), key=lambda w: w.t)
    if not writes:
        return f"no writes seen for {name}"
    lines = [f"writes of {name} (seconds after its creation):"]
    for w in writes:
        lines.append(f"{w.t - writes[0].t:8.2f}  {w.kind} {w.what} {w.name}")
        lines += [f"            {change}" for change in w.changes]
    return "\n".join(lines)
