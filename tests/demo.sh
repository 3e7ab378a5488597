#!/usr/bin/env bash
# `make demo`: bring up the SLURM test cluster and a hook server, walk a BatchJob to Succeeded,
# then stop the hook server and whatever cluster daemons this run started, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "make demo needs root: it brings up the SLURM test cluster" >&2; exit 1; }
work=$(mktemp -d)
server=""
finish() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  bash tests/clusters/slurm-down.sh --started "$work/started" || true
  rm -rf "$work"
}
trap finish EXIT
echo "bringing up the SLURM test cluster..."
bash tests/clusters/slurm-up.sh --started "$work/started" </dev/null >"$work/up.log" 2>&1 \
  || { cat "$work/up.log"; exit 1; }
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
HOST=127.0.0.1 PORT=$port .venv/bin/gunicorn -c python:hooks.gunicorn_conf 'hooks.app:create_app()' \
  >"$work/hooks.log" 2>&1 &
server=$!
.venv/bin/python -m tests.demo --url "http://127.0.0.1:$port"
