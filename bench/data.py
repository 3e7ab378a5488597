"""`make bench-data`: the movers against ``scp -r`` of the same files, both ways.

On the SLURM test cluster it writes three sets of files into a directory of the cluster user:
1 GiB as one large file and 1000 small ones (``results``), ``--many`` small files
(``many``), and one file of ``--huge-gib`` GiB (``huge``). For each set it times, ``--runs``
times, and takes the median:

- outputs: the outputs mover to the S3 store of tests/clusters/s3-up.sh and into a local
  directory standing for a claim, against ``scp -r`` of the directory from the same sshd;
- inputs: the inputs mover from S3 and from a claim directory into a staging directory on the
  cluster, against ``scp -r`` of the same local directory to the same sshd;
- the store's own ceiling: the same files uploaded from local disk, and downloaded to it,
  with the movers' S3 client (minio), ``WORKERS`` at a time.

The movers of this code and of ``--baseline-ref`` (from a git worktree) both run on the 1 GiB
set and the many small files; the huge file runs with this code only. Each mover's peak RSS is
kept. The figures go to bench/results.md (section ``data``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from minio import Minio

from bench.follow import worktree
from bench.report import machine, update
from hooks.pods.movers.workers import WORKERS
from tests.integration.conftest import read_env
from tests.integration.kubelet import finished

REPO = Path(__file__).resolve().parent.parent
BUCKET = "hpcbridge-bench"
MASTER_PORT = os.environ.get("HPCBRIDGE_S3_MASTER_PORT", "2334")
"""The SeaweedFS master of tests/clusters/s3-up.sh (its vacuum)."""


@dataclass(frozen=True)
class Row:
    what: str
    seconds: float
    peak_kib: int
    total: int
    failed: int = 0
    """Runs that failed (the median is of the others)."""


class Failed(Exception):
    """A run of a copy ended with a failure."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--many", type=int, default=10_000, help="small files in the second set")
    parser.add_argument("--many-kib", type=int, default=4)
    parser.add_argument("--huge-gib", type=int, default=10, help="0: no huge file")
    parser.add_argument("--huge-runs", type=int, default=1,
                        help="runs of each copy of the huge file (each takes minutes)")
    parser.add_argument("--baseline-ref", default="a7221c4",
                        help="the commit whose movers are the baseline")
    args = parser.parse_args()
    bench = Bench(args)
    try:
        sets: list[tuple[str, str, str, bool, int]] = [
            ("1 GiB: one file of 962 MiB and 1000 of 64 KiB", "results",
             "head -c 962M /dev/urandom > large.bin && mkdir small && for i in $(seq 1 1000); "
             "do head -c 64K /dev/urandom > small/$i.bin; done", True, 0),
            (f"{args.many} files of {args.many_kib} KiB", "many",
             f"for i in $(seq 1 {args.many}); do head -c {args.many_kib}K /dev/urandom "
             "> $i.bin; done", True, 0)]
        if args.huge_gib:
            sets.append((f"one file of {args.huge_gib} GiB", "huge",
                         f"head -c {args.huge_gib}G /dev/urandom > huge.bin", False,
                         args.huge_runs))
        sections = [bench.measure(*each) for each in sets]
    finally:
        bench.close()
    given = f" BENCH_ARGS='{' '.join(sys.argv[1:])}'" if sys.argv[1:] else ""
    text = "\n".join([
        "## Data: the movers against scp",
        "",
        machine().replace("load generator", "the cluster's sshd and the S3 store") + " (loopback)",
        f"- command: `make bench-data{given}`; each copy's median of the runs its section "
        "names; peak RSS is the largest of the runs",
        "- movers: `python -m hooks.pods.movers outputs|inputs`, this code (one tar stream "
        "through an exec channel, AES-GCM, the cluster's digests beside it) and "
        f"{args.baseline_ref} (SFTP file by file, AES-CTR); scp: `scp -r` of the same "
        "directory from/to the same sshd, its default cipher; S3: SeaweedFS "
        "(tests/clusters/s3-up.sh); \"store alone\": the same files from/to local disk with "
        f"minio, {WORKERS} at a time",
        "", *sections])
    print(text)
    update(REPO / "bench/results.md", "data", text)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        slurm = read_env(Path("/var/tmp/hpcbridge-slurm/env"))
        s3 = read_env(Path("/var/tmp/hpcbridge-s3/env"))
        self.user, self.host = slurm["HPCBRIDGE_SLURM_USER"], slurm["HPCBRIDGE_SLURM_HOST"]
        self.port = slurm["HPCBRIDGE_SLURM_PORT"]
        self.endpoint = s3["HPCBRIDGE_S3_ENDPOINT"]
        self.remote = f"bench-data-{uuid.uuid4().hex[:8]}"
        self.work = Path(tempfile.mkdtemp())
        self.ssh, self.keys = self.work / "ssh", self.work / "s3"
        self.ssh.mkdir()
        self.keys.mkdir()
        shutil.copy(slurm["HPCBRIDGE_SLURM_KEY"], self.ssh / "ssh-privatekey")
        shutil.copy(slurm["HPCBRIDGE_SLURM_KNOWN_HOSTS"], self.ssh / "known_hosts")
        (self.ssh / "username").write_text(self.user)
        (self.keys / "AWS_ACCESS_KEY_ID").write_text(s3["HPCBRIDGE_S3_ACCESS_KEY"])
        (self.keys / "AWS_SECRET_ACCESS_KEY").write_text(s3["HPCBRIDGE_S3_SECRET_KEY"])
        self.s3 = Minio(self.endpoint.removeprefix("http://"),
                        access_key=s3["HPCBRIDGE_S3_ACCESS_KEY"],
                        secret_key=s3["HPCBRIDGE_S3_SECRET_KEY"], secure=False,
                        region="us-east-1")
        if not self.s3.bucket_exists(BUCKET):
            self.s3.make_bucket(BUCKET)
        self.baseline = worktree(args.baseline_ref, self.work / "baseline")
        self.scp = ["scp", "-q", "-r", "-o", "BatchMode=yes", "-o",
                    f"UserKnownHostsFile={self.ssh / 'known_hosts'}",
                    "-i", str(self.ssh / "ssh-privatekey"), "-P", self.port]

    def close(self) -> None:
        subprocess.run(["git", "worktree", "remove", "--force", str(self.baseline)], cwd=REPO,
                       check=False, capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)
        self.on_cluster(f"rm -rf {self.remote}")
        self.empty(f"{self.remote}/")

    def on_cluster(self, script: str) -> None:
        subprocess.run(["runuser", "-u", self.user, "--", "sh", "-c", f"cd && {script}"],
                       check=True)

    def empty(self, prefix: str) -> None:
        """Remove the objects under ``prefix`` and have the store give their space back (its
        volumes keep deleted bytes until vacuumed)."""
        for obj in self.s3.list_objects(BUCKET, prefix=prefix, recursive=True):
            self.s3.remove_object(BUCKET, obj.object_name)
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{MASTER_PORT}/vol/vacuum?"
                                   "garbageThreshold=0.01", timeout=600).read()

    def measure(self, title: str, name: str, make: str, both: bool, runs: int = 0) -> str:
        """The section of one set of files, each copy ``runs`` times (default ``--runs``)."""
        self.runs = runs or self.args.runs
        self.on_cluster(f"mkdir -p {self.remote}/{name} && cd {self.remote}/{name} && {make}")
        local = self.work / f"local-{name}"
        subprocess.run([*self.scp, f"{self.user}@{self.host}:{self.remote}/{name}", str(local)],
                       check=True)
        total = sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
        codes = [("this code", REPO)] + ([(self.args.baseline_ref, self.baseline)] if both
                                         else [])
        rows = [self.median("scp -r, from the cluster", total, lambda i: (
            [*self.scp, f"{self.user}@{self.host}:{self.remote}/{name}",
             str(self.work / f"out-{i}")], REPO), after=lambda i: shutil.rmtree(
                self.work / f"out-{i}"))]
        for label, code in codes:
            rows.append(self.median(f"outputs to S3 ({label})", total, lambda i, c=code: (
                self.outputs(name, "S3", self.work / f"out-{i}", f"o{i}", c), c),
                after=lambda i: self.empty(f"{self.remote}/")))
            rows.append(self.median(f"outputs to a claim ({label})", total, lambda i, c=code: (
                self.outputs(name, "claim", self.work / f"out-{i}", f"o{i}", c), c),
                before=lambda i: (self.work / f"out-{i}").mkdir(),
                after=lambda i: shutil.rmtree(self.work / f"out-{i}")))
        rows.append(self.median("S3 alone, from local disk", total, None,
                                fn=lambda i: self.store_up(local, f"{self.remote}/up-{i}/"),
                                after=lambda i: self.empty(f"{self.remote}/up-{i}/")))
        self.store_up(local, f"{self.remote}/in/")
        self.on_cluster(f"rm -rf {self.remote}/{name}")
        rows.append(self.median("scp -r, to the cluster", total, lambda i: (
            [*self.scp, str(local), f"{self.user}@{self.host}:{self.remote}/up-{i}"], REPO),
            after=lambda i: self.on_cluster(f"rm -rf {self.remote}/up-{i}")))
        for label, code in codes:
            rows.append(self.median(f"inputs from S3 ({label})", total, lambda i, c=code: (
                self.inputs({"s3": {"bucket": BUCKET, "key": "",
                                    "prefix": f"{self.remote}/in/"}}, i, c), c),
                after=lambda i: self.on_cluster(f"rm -rf {self.remote}/stage-{i}")))
            rows.append(self.median(f"inputs from a claim ({label})", total, lambda i, c=code: (
                self.inputs({"dir": str(local)}, i, c), c),
                after=lambda i: self.on_cluster(f"rm -rf {self.remote}/stage-{i}")))
        rows.append(self.median("S3 alone, to local disk", total, None,
                                fn=lambda i: self.store_down(f"{self.remote}/in/",
                                                             self.work / f"down-{i}"),
                                after=lambda i: shutil.rmtree(self.work / f"down-{i}")))
        self.empty(f"{self.remote}/in/")
        shutil.rmtree(local)
        up = next(r.seconds for r in rows if r.what == "scp -r, to the cluster")
        down = rows[0].seconds
        lines = [f"### {title} ({total / 2**30:.2f} GiB; median of {self.runs})", "",
                 "| copy | time | MB/s | vs scp | peak RSS |", "| --- | --- | --- | --- | --- |"]
        for row in rows:
            if not row.seconds:
                lines.append(f"| {row.what} | failed {row.failed} of {self.runs} runs | | | |")
                continue
            scp = up if ("inputs" in row.what or "to the cluster" in row.what
                         or "to local disk" in row.what) else down
            lines.append(f"| {row.what} | {row.seconds:.1f} s | {row.total / row.seconds / 1e6:.0f}"
                         f" | {scp / row.seconds:.2f}x | "
                         + (f"{row.peak_kib / 1024:.0f} MiB |" if row.peak_kib else "- |")
                         + (f" ({row.failed} of {self.runs} runs failed)" if row.failed else ""))
        return "\n".join(lines) + "\n"

    def median(self, what: str, total: int,
               argv: Callable[[int], tuple[list[str], Path]] | None, *,
               fn: Callable[[int], None] | None = None,
               before: Callable[[int], object] = lambda i: None,
               after: Callable[[int], object] = lambda i: None) -> Row:
        seconds, peaks, failed = [], [], 0
        for i in range(self.runs):
            before(i)
            if argv is not None:
                command, cwd = argv(i)
                try:
                    took, peak = timed(command, cwd)
                except Failed as err:
                    print(f"  {what}: {err}", file=sys.stderr, flush=True)
                    failed += 1
                    after(i)
                    continue
            else:
                assert fn is not None
                started = time.monotonic()
                fn(i)
                took, peak = time.monotonic() - started, 0
            after(i)
            seconds.append(took)
            peaks.append(peak)
            print(f"  {what}: {took:.1f} s", file=sys.stderr, flush=True)
        if not seconds:
            return Row(what, 0.0, 0, total, failed)
        return Row(what, statistics.median(seconds), max(peaks), total, failed)

    def login(self) -> list[str]:
        return ["--host", self.host, "--port", self.port, "--secret-dir", str(self.ssh),
                "--report", str(self.work / "report")]

    def outputs(self, name: str, to: str, target: Path, owner: str, code: Path) -> list[str]:
        where = ({"s3": {"bucket": BUCKET, "prefix": f"{self.remote}/{owner}/"}} if to == "S3"
                 else {"dir": str(target)})
        plan = [{"pattern": f"{name}/**", "optional": False, **where}]
        return [sys.executable, "-m", "hooks.pods.movers", "outputs", *self.login(),
                "--remote-dir", self.remote, "--owner", owner, "--plan", json.dumps(plan),
                "--endpoint", self.endpoint, "--s3-secret-dir", str(self.keys), *allowed(code)]

    def inputs(self, source: dict[str, object], i: int, code: Path) -> list[str]:
        plan = [{"path": "data/", **source}]
        return [sys.executable, "-m", "hooks.pods.movers", "inputs", *self.login(),
                "--remote-dir", f"{self.remote}/attempt-{i}",
                "--staging-dir", f"{self.remote}/stage-{i}", "--owner", f"i{i}",
                "--plan", json.dumps(plan), "--endpoint", self.endpoint,
                "--s3-secret-dir", str(self.keys), *allowed(code)]

    def store_up(self, local: Path, prefix: str) -> None:
        files = [p for p in sorted(local.rglob("*")) if p.is_file()]
        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(lambda p: self.s3.fput_object(
                BUCKET, prefix + str(p.relative_to(local)), str(p)), files))

    def store_down(self, prefix: str, into: Path) -> None:
        names = [o.object_name for o in self.s3.list_objects(BUCKET, prefix=prefix,
                                                             recursive=True)]
        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(lambda n: self.s3.fget_object(
                BUCKET, n, str(into / n.removeprefix(prefix))), names))


def allowed(code: Path) -> list[str]:
    """The argument that lets the mover of ``code`` reach the test store on loopback (the hooks
    pass it for a store on an allow-list); a mover from before the check takes none."""
    program = code / "hooks/pods/movers/program.py"
    return ["--endpoint-allowed"] if "--endpoint-allowed" in program.read_text() else []


def timed(argv: list[str], cwd: Path) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one run of ``argv``."""
    started = time.monotonic()
    child = subprocess.Popen(argv, cwd=cwd, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                             stdout=subprocess.DEVNULL)
    status, peak = finished(child, 7200)
    if status != 0:
        raise Failed(f"{' '.join(argv[:4])} failed (exit {status})")
    return time.monotonic() - started, peak // 1024


if __name__ == "__main__":
    main()
