"""`make bench-data`: the outputs mover against a plain scp of the same files.

On the SLURM test cluster it writes 1 GiB of outputs into a directory of the cluster user (one
large file and 1000 small ones), then times, each ``--runs`` times: the outputs mover to the S3
store of tests/clusters/s3-up.sh, the outputs mover into a local directory standing for a
claim, and ``scp -r`` of the same directory from the same login node. It prints MB/s and the
mover's peak RSS and writes them to bench/results.md (section ``data``).
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

from bench.report import machine, update
from tests.integration.conftest import read_env

REPO = Path(__file__).resolve().parent.parent
SMALL = 1000
SMALL_SIZE = 64 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--large-mib", type=int, default=1024 - SMALL * SMALL_SIZE // 2**20)
    args = parser.parse_args()
    slurm = read_env(Path("/var/tmp/hpcbridge-slurm/env"))
    s3 = read_env(Path("/var/tmp/hpcbridge-s3/env"))
    user, remote = slurm["HPCBRIDGE_SLURM_USER"], f"bench-data-{uuid.uuid4().hex[:8]}"
    home = Path(f"/home/{user}")
    make = (f"mkdir -p {remote}/results/small && head -c {args.large_mib}M /dev/urandom "
            f"> {remote}/results/large.bin && for i in $(seq 1 {SMALL}); do head -c "
            f"{SMALL_SIZE} /dev/urandom > {remote}/results/small/$i.bin; done")
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
        rows = []
        for name in ("S3", "claim directory", "scp -r"):
            seconds, rss = [], []
            for run in range(args.runs):
                target = work / f"out-{run}"
                target.mkdir()
                if name == "scp -r":
                    argv = ["scp", "-q", "-r", "-o", "BatchMode=yes", "-o",
                            f"UserKnownHostsFile={ssh / 'known_hosts'}", "-i",
                            str(ssh / "ssh-privatekey"), "-P", slurm["HPCBRIDGE_SLURM_PORT"],
                            f"{user}@{slurm['HPCBRIDGE_SLURM_HOST']}:{remote}/results",
                            str(target)]
                else:
                    plan = [{"pattern": "results/**", "optional": False,
                             **({"s3": {"bucket": bucket, "prefix": f"run-{run}/"}}
                                if name == "S3" else {"dir": str(target)})}]
                    argv = [sys.executable, "-m", "hooks.movers", "outputs", *base,
                            "--owner", f"bench-{run}", "--plan", json.dumps(plan),
                            "--endpoint", s3["HPCBRIDGE_S3_ENDPOINT"], "--s3-secret-dir",
                            str(keys)]
                took, peak = timed(argv)
                seconds.append(took)
                rss.append(peak)
                shutil.rmtree(target)
            rows.append((name, statistics.median(seconds), max(rss)))
    finally:
        shutil.rmtree(work)
        subprocess.run(["rm", "-rf", str(home / remote)], check=False)
    scp = rows[-1][1]
    lines = [
        "## Data: collecting outputs",
        "",
        f"{machine()}; the cluster's sshd and the S3 store too (loopback)",
        f"- outputs: {total / 2**30:.2f} GiB in the attempt's directory of the SLURM test "
        f"cluster: one file of {args.large_mib} MiB and {SMALL} files of "
        f"{SMALL_SIZE // 1024} KiB; pattern `results/**`",
        "- mover: `python -m hooks.movers outputs` (cluster-side SHA-256, SFTP windows of "
        "8 MiB, 16 MiB multipart parts, one at a time); S3: SeaweedFS (tests/clusters/s3-up.sh); "
        "baseline: `scp -r` of the same directory from the same sshd",
        f"- command: `make bench-data`; median of {args.runs} runs; peak RSS is the largest of "
        "the runs",
        "",
        "| copy | time | MB/s | vs scp | peak RSS |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {name} | {took:.1f} s | {total / took / 1e6:.0f} | {scp / took:.2f}x | "
          f"{peak / 1024:.0f} MiB |" for name, took, peak in rows),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    update(REPO / "bench/results.md", "data", text)


def timed(argv: list[str]) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one run of ``argv``."""
    started = time.monotonic()
    child = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                             stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"{argv[:4]} failed ({status})")
    return time.monotonic() - started, usage.ru_maxrss


if __name__ == "__main__":
    main()
