"""`make bench-data`: the outputs mover against a plain scp of the same files.

On the SLURM test cluster it writes 1 GiB of outputs into a directory of the cluster user (one
large file and 1000 small ones), then times, each ``--runs`` times: the outputs mover to the S3
store of tests/clusters/s3-up.sh, the outputs mover into a local directory standing for a
claim, and ``scp -r`` of the same directory from the same login node; the movers of this code
and of ``--baseline-ref`` (from a git worktree). It prints MB/s and the mover's peak RSS, then
each mover's peak RSS copying one file of each of ``--sizes`` MiB to S3 and a claim, and writes
them to bench/results.md (section ``data``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from minio import Minio

from bench.follow import worktree
from bench.report import machine, update
from tests.integration.conftest import read_env
from tests.integration.kubelet import finished

REPO = Path(__file__).resolve().parent.parent
SMALL = 1000
SMALL_SIZE = 64 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--large-mib", type=int, default=1024 - SMALL * SMALL_SIZE // 2**20)
    parser.add_argument("--sizes", default="64,512", help="MiB, for peak RSS by file size")
    parser.add_argument("--baseline-ref", default="66586f2",
                        help="the commit whose mover is the baseline")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    slurm = read_env(Path("/var/tmp/hpcbridge-slurm/env"))
    s3 = read_env(Path("/var/tmp/hpcbridge-s3/env"))
    user, remote = slurm["HPCBRIDGE_SLURM_USER"], f"bench-data-{uuid.uuid4().hex[:8]}"
    home = Path(f"/home/{user}")
    make = (f"mkdir -p {remote}/results/small && head -c {args.large_mib}M /dev/urandom "
            f"> {remote}/results/large.bin && for i in $(seq 1 {SMALL}); do head -c "
            f"{SMALL_SIZE} /dev/urandom > {remote}/results/small/$i.bin; done && mkdir "
            f"{remote}/sizes" + "".join(f" && head -c {size}M /dev/urandom > "
                                        f"{remote}/sizes/{size}.bin" for size in sizes))
    subprocess.run(["runuser", "-u", user, "--", "sh", "-c", f"cd && {make}"], check=True)
    total = args.large_mib * 2**20 + SMALL * SMALL_SIZE
    work = Path(tempfile.mkdtemp())
    try:
        ssh, keys = work / "ssh", work / "s3"
        ssh.mkdir()
        keys.mkdir()
        shutil.copy(slurm["HPCBRIDGE_SLURM_KEY"], ssh / "ssh-privatekey")
        shutil.copy(slurm["HPCBRIDGE_SLURM_KNOWN_HOSTS"], ssh / "known_hosts")
        (ssh / "username").write_text(user)
        (keys / "AWS_ACCESS_KEY_ID").write_text(s3["HPCBRIDGE_S3_ACCESS_KEY"])
        (keys / "AWS_SECRET_ACCESS_KEY").write_text(s3["HPCBRIDGE_S3_SECRET_KEY"])
        client = Minio(s3["HPCBRIDGE_S3_ENDPOINT"].removeprefix("http://"),
                       access_key=s3["HPCBRIDGE_S3_ACCESS_KEY"],
                       secret_key=s3["HPCBRIDGE_S3_SECRET_KEY"], secure=False,
                       region="us-east-1")
        bucket = "hpcbridge-bench"
        if not client.bucket_exists(bucket):
            client.make_bucket(bucket)
        base = ["--host", slurm["HPCBRIDGE_SLURM_HOST"], "--port", slurm["HPCBRIDGE_SLURM_PORT"],
                "--secret-dir", str(ssh), "--remote-dir", remote, "--report",
                str(work / "report")]
        baseline = worktree(args.baseline_ref, work / "baseline")
        codes = (("this code", REPO), (args.baseline_ref, baseline))

        def mover(pattern: str, to: str, target: Path, owner: str, cwd: Path) -> list[str]:
            plan = [{"pattern": pattern, "optional": False,
                     **({"s3": {"bucket": bucket, "prefix": f"{remote}/{owner}/"}}
                        if to == "S3" else {"dir": str(target)})}]
            return [sys.executable, "-m", "hooks.pods.movers", "outputs", *base, "--owner", owner,
                    "--plan", json.dumps(plan), "--endpoint", s3["HPCBRIDGE_S3_ENDPOINT"],
                    "--s3-secret-dir", str(keys), *allowed(cwd)]

        def run(argv: list[str], cwd: Path, target: Path) -> tuple[float, int]:
            target.mkdir()
            try:
                return timed(argv, cwd)
            finally:
                shutil.rmtree(target)
                for obj in client.list_objects(bucket, prefix=f"{remote}/", recursive=True):
                    client.remove_object(bucket, obj.object_name)

        rows = []
        for name, cwd, to in [(n, c, t) for t in ("S3", "claim directory") for n, c in codes] + [
                ("scp -r", REPO, "")]:
            seconds, rss = [], []
            for i in range(args.runs):
                target = work / f"out-{i}"
                argv = mover("results/**", to, target, f"bench-{i}", cwd) if to else [
                    "scp", "-q", "-r", "-o", "BatchMode=yes", "-o",
                    f"UserKnownHostsFile={ssh / 'known_hosts'}", "-i", str(ssh / "ssh-privatekey"),
                    "-P", slurm["HPCBRIDGE_SLURM_PORT"],
                    f"{user}@{slurm['HPCBRIDGE_SLURM_HOST']}:{remote}/results", str(target)]
                took, peak = run(argv, cwd, target)
                seconds.append(took)
                rss.append(peak)
            rows.append((f"{to} ({name})" if to else name, statistics.median(seconds), max(rss)))
        peaks = {(name, size): max(run(mover(f"sizes/{size}.bin", to, work / "one", "one", cwd),
                                       cwd, work / "one")[1] for to in ("S3", "claim directory"))
                 for name, cwd in codes for size in sizes}
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(work / "baseline")],
                       cwd=REPO, check=False, capture_output=True)
        shutil.rmtree(work)
        subprocess.run(["rm", "-rf", str(home / remote)], check=False)
    scp = rows[-1][1]
    given = f" BENCH_ARGS='{' '.join(sys.argv[1:])}'" if sys.argv[1:] else ""
    lines = [
        "## Data: collecting outputs",
        "",
        machine().replace("load generator", "the cluster's sshd and the S3 store") +
        " (loopback)",
        f"- outputs: {total / 2**30:.2f} GiB in the attempt's directory of the SLURM test "
        f"cluster: one file of {args.large_mib} MiB and {SMALL} files of "
        f"{SMALL_SIZE // 1024} KiB; pattern `results/**`",
        "- mover: `python -m hooks.pods.movers outputs` (cluster-side SHA-256; this code: 16 SFTP "
        "reads of 255 KiB in flight, files up to 1 MiB four at a time, 8 MiB multipart parts, "
        "two at a time; "
        f"{args.baseline_ref}: paramiko's readv in windows of 8 MiB, one file at a time, 16 MiB "
        "parts); S3: SeaweedFS (tests/clusters/s3-up.sh); baseline: `scp -r` of the same "
        "directory from the same sshd",
        f"- command: `make bench-data{given}`; median of {args.runs} runs; peak RSS is the "
        "largest of the runs",
        "",
        "| copy | time | MB/s | vs scp | peak RSS |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {name} | {took:.1f} s | {total / took / 1e6:.0f} | {scp / took:.2f}x | "
          f"{peak / 1024:.0f} MiB |" for name, took, peak in rows),
        "",
        "Peak RSS of one run copying one file to S3 and to a claim directory (the larger of the "
        "two), by the file's size:",
        "",
        "| mover | " + " | ".join(f"{size} MiB" for size in sizes) + " |",
        "| --- |" + " --- |" * len(sizes),
        *(f"| {name} | " + " | ".join(f"{peaks[name, size] / 1024:.0f} MiB" for size in sizes)
          + " |" for name, _ in codes),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    update(REPO / "bench/results.md", "data", text)


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
    status, peak = finished(child, 3600)
    if status != 0:
        raise SystemExit(f"{argv[:4]} failed ({status})")
    return time.monotonic() - started, peak // 1024

if __name__ == "__main__":
    main()
