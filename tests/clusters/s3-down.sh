#!/usr/bin/env bash
# Stop the S3 server of s3-up.sh. It is stopped only through the pid file s3-up.sh recorded, and
# only if /proc/PID/exe is the weed binary: SIGTERM, then SIGKILL after 10 s (SeaweedFS takes
# longer than that to end on SIGTERM). s3-up.sh starts it again with the same keys and data.
#
# Usage: s3-down.sh [--purge] [--started FILE]
#   (no option)     stop the server
#   --started FILE  stop it only if its pid file is listed in FILE (as written by
#                   s3-up.sh --started FILE), then remove FILE
#   --purge         after stopping it, delete the state dir (keys, data, logs)
# Knobs: HPCBRIDGE_S3_STATE (/var/tmp/hpcbridge-s3), HPCBRIDGE_S3_WEED (the venv's bin/weed).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd -- "$HERE/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_S3_STATE:-/var/tmp/hpcbridge-s3}
WEED=${HPCBRIDGE_S3_WEED:-$REPO/.venv/bin/weed}
PIDFILE=$STATE/pids/weed.pid
PURGE=0
STARTED_FILE=""

main() {
    parse_options down "" "$@"
    if ((PURGE)) && [[ -n $STARTED_FILE ]]; then
        die "--purge stops everything; it cannot be combined with --started"
    fi
    [[ $EUID -eq 0 ]] || die "run as root"
    [[ ! -d $STATE ]] || lock_state s3
    local rc=0
    if [[ -z $STARTED_FILE ]] || lists_pidfile "$STARTED_FILE" "$PIDFILE"; then
        stop_daemon "$PIDFILE" "$WEED" "the S3 server" "the S3 server is not running" || rc=1
    fi
    if ((rc == 0)) && [[ -n $STARTED_FILE ]]; then
        rm -f -- "$STARTED_FILE"
    fi
    if ((PURGE)); then
        ((rc == 0)) || die "not purging $STATE: the S3 server could not be stopped"
        purge_state .hpcbridge-s3-state
    fi
    log "s3-down done"
    return "$rc"
}

main "$@"
