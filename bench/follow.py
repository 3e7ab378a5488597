"""Scheduler load of follow-mode log Pods, on the real SLURM test cluster.

N log Pods (``python -m hooks.pods.logs --follow``, as the Pods run it) follow N attempts whose jobs
are held in the queue, for ``--seconds``; the scheduler's load is read from slurmctld's own
RPC counters (``sdiag``: every request of the cluster user, whom only the Pods act as during
the measurement), before and after.
The same is measured for the log Pod of ``--baseline-ref`` (the program as it was before the
end marker, from a git worktree of this repository), which asked squeue every 3 s per Pod.
Results go to stdout and to the ``follow`` section of ``bench/results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from bench import report
from tests.integration.conftest import Cluster, cluster_from_state

REPO = Path(__file__).resolve().parent.parent


def requests_of(user: str) -> int:
    """slurmctld's count of RPCs from ``user`` so far (squeue, scontrol, sbatch...)."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    by_user = out.split("statistics by user", 1)[1]
    found = re.search(rf"^\s*{re.escape(user)}\s+\(\s*\d+\)\s+count:(\d+)", by_user, re.M)
    return int(found.group(1)) if found else 0


def attempts(cluster: Cluster, n: int) -> list[tuple[str, str, str]]:
    """N held jobs, each with an attempt directory holding one output file: (key, job id,
    remote dir)."""
    made = []
    for i in range(n):
        key = f"{uuid.uuid4()}-1"
        remote = f".hpcbridge/bench-follow/job-{i}/{key[:-2]}/attempt-1"
        job = cluster.as_user(
            f"mkdir -p ~/{remote} && cd ~/{remote} && sbatch --parsable --hold "
            f"--job-name=hpcb-{key} --output=/dev/null --wrap='sleep 600'").strip()
        cluster.as_user(f"printf 'started\\n' > ~/{remote}/{job}.out")
        made.append((key, job, remote))
    return made


@contextlib.contextmanager
def pods(code: Path, cluster: Cluster, made: list[tuple[str, str, str]],
         secret: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The log Pods' program from ``code``, one process per attempt, started a few at a time
    (sshd drops unauthenticated connections beyond MaxStartups 10)."""
    running: list[subprocess.Popen[bytes]] = []
    try:
        for key, job, remote in made:
            running.append(subprocess.Popen(
                [sys.executable, "-m", "hooks.pods.logs", "--backend=slurm",
                 f"--host={cluster.host}", f"--port={cluster.port}", f"--remote-dir={remote}",
                 f"--key={key}", f"--job-id={job}", f"--secret-dir={secret}", "--follow"],
                cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            if len(running) % 5 == 0:
                time.sleep(0.5)
        yield running
    finally:
        for pod in running:
            pod.send_signal(signal.SIGTERM)
        for pod in running:
            try:
                pod.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pod.kill()
                pod.wait()


def measure(code: Path, cluster: Cluster, made: list[tuple[str, str, str]], secret: Path,
            seconds: float) -> tuple[float, int]:
    """The cluster user's scheduler RPCs per minute while the Pods follow, and how many Pods
    were still running at the end."""
    with pods(code, cluster, made, secret) as running:
        time.sleep(15)  # every Pod logged in and polling
        before = requests_of(cluster.user)
        time.sleep(seconds)
        after = requests_of(cluster.user)
        alive = sum(pod.poll() is None for pod in running)
    return (after - before) * 60 / seconds, alive


def worktree(ref: str, into: Path) -> Path:
    subprocess.run(["git", "worktree", "add", "--detach", str(into), ref], cwd=REPO,
                   check=True, capture_output=True)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", default="10,100")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--baseline-ref", default="0432430",
                        help="the commit whose log Pod is the baseline")
    parser.add_argument("--out", default="bench/results.md")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the Pods on the way out
    cluster = cluster_from_state("slurm")
    if cluster is None:
        raise SystemExit("the SLURM test cluster is not up: run tests/clusters/slurm-up.sh")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "secret"
        secret.mkdir()
        for name, value in (("username", cluster.user), ("ssh-privatekey", cluster.key),
                            ("known_hosts", cluster.known_hosts)):
            (secret / name).write_text(value)
        baseline = worktree(args.baseline_ref, Path(tmp) / "baseline")
        try:
            for n in (int(x) for x in args.pods.split(",")):
                made = attempts(cluster, n)
                try:
                    now, alive = measure(REPO, cluster, made, secret, args.seconds)
                    then, alive_then = measure(baseline, cluster, made, secret, args.seconds)
                finally:
                    cluster.as_user("scancel " + " ".join(job for _, job, _ in made))
                    cluster.as_user("rm -rf ~/.hpcbridge/bench-follow")
                rows.append((n, now, alive, then, alive_then))
                print(f"{n} pods: {now:.0f}/min now ({alive} following), {then:.0f}/min "
                      f"baseline ({alive_then} following)", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=REPO,
                           check=False, capture_output=True)
    text = write(rows, args)
    report.update(REPO / args.out, "follow", text)
    print(text)
    return 0


def write(rows: list[tuple[int, float, int, float, int]], args: argparse.Namespace) -> str:
    lines = [
        "## Follow-mode log Pods: scheduler load",
        "",
        report.machine(),
        "- cluster: the SLURM 22.05 test cluster; every job held in the queue, so every Pod "
        "keeps following",
        f"- command: `make bench-follow BENCH_ARGS='--pods {args.pods} --seconds "
        f"{args.seconds:g}'`; load: slurmctld's RPCs from the cluster user (`sdiag`, by "
        f"user) during {args.seconds:g} s, after the Pods logged in",
        f"- baseline: the log Pod of {args.baseline_ref} (an squeue per Pod every 3 s, plus "
        "2N+1 commands per poll for N task files)",
        "",
        "| follow Pods | scheduler RPCs per minute | baseline: scheduler RPCs per minute |",
        "| --- | --- | --- |",
    ]
    for n, now, alive, then, alive_then in rows:
        lines.append(f"| {n} | {now:.0f} ({alive} following) | "
                     f"{then:.0f} ({alive_then} following) |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
