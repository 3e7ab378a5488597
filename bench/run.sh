#!/usr/bin/env bash
# `make bench`, `make bench-follow` and `make bench-slow`: bring up the SLURM test cluster, run
# the benchmark module (BENCH_MODULE, bench.bench by default), stop what this run started.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "make bench needs root: it brings up the SLURM test cluster" >&2; exit 1; }
work=$(mktemp -d)
trap 'bash tests/clusters/slurm-down.sh --started "$work/started" || true
      bash tests/clusters/s3-down.sh --started "$work/started-s3" || true; rm -rf "$work"' EXIT
bash tests/clusters/slurm-up.sh --started "$work/started" </dev/null >"$work/up.log" 2>&1 \
  || { cat "$work/up.log"; exit 1; }
# bench.data also needs the S3 store (BENCH_S3=1).
if [ -n "${BENCH_S3:-}" ]; then
  bash tests/clusters/s3-up.sh --started "$work/started-s3" </dev/null >"$work/s3-up.log" 2>&1 \
    || { cat "$work/s3-up.log"; exit 1; }
fi
.venv/bin/python -m "${BENCH_MODULE:-bench.bench}" "$@"
