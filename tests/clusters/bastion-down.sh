#!/usr/bin/env bash
# Stop the SSH bastion of bastion-up.sh. Its sshd is stopped only through the pid file
# bastion-up.sh recorded, and only if /proc/PID/exe is sshd; the connections open through it
# (its per-connection sshd processes) are ended with it. bastion-up.sh starts it again.
#
# Usage: bastion-down.sh [--purge] [--started FILE]
#   (no option)     stop the bastion's sshd and the connections open through it
#   --started FILE  stop it only if its pid file is listed in FILE (as written by
#                   bastion-up.sh --started FILE), then remove FILE
#   --purge         after stopping it, delete the state dir (keys, log) and take its key out of
#                   the jump user's authorized_keys; the jump user stays
# Knobs: HPCBRIDGE_BASTION_STATE (/var/tmp/hpcbridge-bastion).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_BASTION_STATE:-/var/tmp/hpcbridge-bastion}
SSHD=/usr/sbin/sshd
PIDFILE=$STATE/pids/sshd.pid

PURGE=0
STARTED_FILE=""

parse_args() {
    parse_options down "" "$@"
    if ((PURGE)) && [[ -n $STARTED_FILE ]]; then
        die "--purge stops everything; it cannot be combined with --started"
    fi
}

# The bastion's sshd, with the connections open through it.
stop_sshd() {
    stop_daemon "$PIDFILE" "$SSHD" "the bastion's sshd" "the bastion's sshd is not running" 1
}

# Takes the jump key of this state dir out of the jump user's authorized_keys.
forget_key() {
    local user home auth line
    [[ -r $STATE/env && -r $STATE/ssh/id_ed25519.pub ]] || return 0
    user=$(sed -n 's/^HPCBRIDGE_BASTION_USER=//p' "$STATE/env")
    [[ -n $user ]] && home=$(getent passwd "$user" | cut -d: -f6) || return 0
    auth=$home/.ssh/authorized_keys
    [[ -f $auth ]] || return 0
    line="restrict,port-forwarding $(cut -d' ' -f1,2 "$STATE/ssh/id_ed25519.pub")"
    grep -vxF -- "$line" "$auth" >"$auth.new" || true
    chown --reference="$auth" "$auth.new"
    chmod 600 "$auth.new"
    mv -f "$auth.new" "$auth"
}

main() {
    parse_args "$@"
    [[ $EUID -eq 0 ]] || die "run as root"
    [[ ! -d $STATE ]] || lock_state bastion
    local rc=0
    if [[ -z $STARTED_FILE ]] || lists_pidfile "$STARTED_FILE" "$PIDFILE"; then
        stop_sshd || rc=1
    fi
    if ((rc == 0)) && [[ -n $STARTED_FILE ]]; then
        rm -f -- "$STARTED_FILE"
    fi
    if ((PURGE)); then
        ((rc == 0)) || die "not purging $STATE: the bastion's sshd could not be stopped"
        purge_state .hpcbridge-bastion-state forget_key
    fi
    log "bastion-down done"
    return "$rc"
}

main "$@"
