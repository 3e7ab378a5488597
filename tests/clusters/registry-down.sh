#!/usr/bin/env bash
# Stop the two registries of registry-up.sh. Each is stopped only through the pid file
# registry-up.sh recorded, and only if /proc/PID/exe is docker-registry: SIGTERM, then SIGKILL
# after 10 s. registry-up.sh starts them again with the same CA, password and images. The CA
# stays in the system trust stores (of this machine and of the HTCondor rootfs) until --purge.
#
# Usage: registry-down.sh [--purge] [--started FILE]
#   (no option)     stop both registries
#   --started FILE  stop only those whose pid files are listed in FILE (as written by
#                   registry-up.sh --started FILE), then remove FILE
#   --purge         after stopping them, take the CA out of the trust stores and delete the
#                   state dir (CA, password, images, buildah storage, logs)
# Knobs: HPCBRIDGE_REGISTRY_STATE (/var/tmp/hpcbridge-registry), HPCBRIDGE_CONDOR_STATE
# (/var/tmp/hpcbridge-condor).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_REGISTRY_STATE:-/var/tmp/hpcbridge-registry}
CONDOR_STATE=${HPCBRIDGE_CONDOR_STATE:-/var/tmp/hpcbridge-condor}
REGISTRY_BIN=/usr/bin/docker-registry
CA_NAME=hpcbridge-test-registry-ca.crt
PURGE=0
STARTED_FILE=""

# listed FILE PIDFILE: FILE (written through record_started) lists PIDFILE. Unlike
# lists_pidfile, the other registry's pid file is no unknown line here.
listed() {
    [[ -e $1 ]] || return 1
    grep -qxF -- "$2" "$1"
}

# untrust ROOT: take the test CA out of the trust store of the system at ROOT.
untrust() {
    local root=$1 out
    [[ -e $root/usr/local/share/ca-certificates/$CA_NAME ]] || return 0
    # Without --fresh (which would rebuild every link), update-ca-certificates leaves the
    # certificate's own link and its hash link dangling.
    local link
    for link in "$root"/etc/ssl/certs/*; do
        [[ -L $link && $(readlink -- "$link") == "${CA_NAME%.crt}.pem" ]] && rm -f -- "$link"
    done
    rm -f -- "$root/usr/local/share/ca-certificates/$CA_NAME" "$root/etc/ssl/certs/${CA_NAME%.crt}.pem"
    if [[ $root == / ]]; then
        out=$(update-ca-certificates 2>&1) || printf '%s\n' "$out" >&2
    elif [[ -x $root/usr/sbin/update-ca-certificates ]]; then
        out=$(chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            update-ca-certificates 2>&1) || printf '%s\n' "$out" >&2
    fi
    log "the test registry CA is no longer trusted in ${root%/}/etc/ssl/certs"
}

main() {
    parse_options down "" "$@"
    if ((PURGE)) && [[ -n $STARTED_FILE ]]; then
        die "--purge stops everything; it cannot be combined with --started"
    fi
    [[ $EUID -eq 0 ]] || die "run as root"
    [[ ! -d $STATE ]] || lock_state registry
    local rc=0 name pidfile line
    if [[ -n $STARTED_FILE && -e $STARTED_FILE ]]; then
        while IFS= read -r line || [[ -n $line ]]; do
            [[ -z $line || $line == "$STATE/pids/registry-public.pid" || $line == "$STATE/pids/registry-private.pid" ]] ||
                log "WARNING: ignoring unknown pid file '$line' in $STARTED_FILE"
        done <"$STARTED_FILE"
    elif [[ -n $STARTED_FILE ]]; then
        log "$STARTED_FILE does not exist: nothing was started"
    fi
    for name in public private; do
        pidfile=$STATE/pids/registry-$name.pid
        if [[ -z $STARTED_FILE ]] || listed "$STARTED_FILE" "$pidfile"; then
            stop_daemon "$pidfile" "$REGISTRY_BIN" "the $name registry" "the $name registry is not running" || rc=1
        fi
    done
    if ((rc == 0)) && [[ -n $STARTED_FILE ]]; then
        rm -f -- "$STARTED_FILE"
    fi
    if ((PURGE)); then
        ((rc == 0)) || die "not purging $STATE: a registry could not be stopped"
        if [[ -e $STATE/.hpcbridge-registry-state ]]; then
            untrust /
            [[ ! -d $CONDOR_STATE/rootfs/etc ]] || untrust "$(cd "$CONDOR_STATE/rootfs" && pwd -P)"
        fi
        purge_state .hpcbridge-registry-state
    fi
    log "registry-down done"
    return "$rc"
}

main "$@"
