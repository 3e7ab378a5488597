#!/usr/bin/env bash
# Stop the SLURM test cluster of slurm-up.sh. Processes are stopped only through the pid files
# slurm-up.sh recorded, and only if /proc/PID/exe is the expected daemon binary.
#
# Usage: slurm-down.sh [--purge] [--started FILE] [DAEMON...]
#   (no DAEMON)     scancel the test user's jobs (if slurmctld is up), then stop all six daemons
#                   in reverse start order: sshd slurmd slurmctld slurmdbd mariadbd munged
#   DAEMON...       stop only these (munged mariadbd slurmdbd slurmctld slurmd sshd), e.g. to
#                   simulate an outage; slurm-up.sh brings them back
#   --started FILE  stop only the daemons whose pid files are listed in FILE (as written by
#                   slurm-up.sh --started FILE), then remove FILE
#   --purge         after stopping everything, delete the state dir (MariaDB, keys, job history)
# Knobs: HPCBRIDGE_SLURM_STATE (/var/tmp/hpcbridge-slurm), HPCBRIDGE_SLURM_USER (hpcuser; the
# value in $STATE/env wins).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_SLURM_STATE:-/var/tmp/hpcbridge-slurm}
TEST_USER=${HPCBRIDGE_SLURM_USER:-hpcuser}

. "$HERE/slurm-daemons.sh"

PURGE=0
STARTED_FILE=""
NAMES=()
declare -A SELECTED=() # daemon name -> pid file

# add_name DAEMON: a daemon named on the command line.
add_name() {
    [[ -v "EXE[$1]" ]] || die "unknown daemon '$1' (one of: ${DAEMONS[*]})"
    NAMES+=("$1")
}

parse_args() {
    parse_options down add_name "$@"
    if ((PURGE)) && [[ -n $STARTED_FILE || ${#NAMES[@]} -gt 0 ]]; then
        die "--purge stops everything; it cannot be combined with --started or daemon names"
    fi
    if [[ -n $STARTED_FILE ]] && ((${#NAMES[@]})); then
        die "give either --started FILE or daemon names, not both"
    fi
}

select_daemons() {
    local name line
    if [[ -n $STARTED_FILE ]]; then
        [[ -e $STARTED_FILE ]] || { log "$STARTED_FILE does not exist: nothing was started"; return 0; }
        while IFS= read -r line || [[ -n $line ]]; do
            [[ -n $line ]] || continue
            name=$(basename -- "$line" .pid)
            if [[ -v "EXE[$name]" ]]; then
                SELECTED[$name]=$line
            else
                log "WARNING: ignoring unknown pid file '$line' in $STARTED_FILE"
            fi
        done <"$STARTED_FILE"
    elif ((${#NAMES[@]})); then
        for name in "${NAMES[@]}"; do SELECTED[$name]=$STATE/pids/$name.pid; done
    else
        for name in "${DAEMONS[@]}"; do SELECTED[$name]=$STATE/pids/$name.pid; done
    fi
}

jobs_gone() {
    [[ -z $(timeout 15 squeue -h -u "$TEST_USER" -o %i 2>/dev/null || echo unknown) ]]
}

# Jobs left running would outlive slurmd (their slurmstepd is not its child for long), and jobs
# left in slurmctld's state would come back on the next start.
cancel_jobs() {
    local ctld_pidfile=${SELECTED[slurmctld]:-$STATE/pids/slurmctld.pid} user
    pid_alive "$ctld_pidfile" "${EXE[slurmctld]}" || return 0
    if [[ -r $STATE/env ]]; then
        user=$(sed -n 's/^HPCBRIDGE_SLURM_USER=//p' "$STATE/env")
        [[ -z $user ]] || TEST_USER=$user
    fi
    id -u "$TEST_USER" >/dev/null 2>&1 || return 0
    log "cancelling jobs of $TEST_USER"
    timeout 20 scancel -u "$TEST_USER" >/dev/null 2>&1 || true
    wait_until 20 jobs_gone || log "WARNING: jobs of $TEST_USER still active after scancel"
}

stop_selected() {
    local i name failed=0 sessions
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
        name=${DAEMONS[i]}
        [[ -v "SELECTED[$name]" ]] || continue
        # sshd's per-connection children keep open sessions alive: an outage ends them too.
        sessions=0
        [[ $name != sshd ]] || sessions=1
        stop_daemon "${SELECTED[$name]}" "${EXE[$name]}" "$name" "$name: not running" "$sessions" || failed=1
    done
    return "$failed"
}

main() {
    parse_args "$@"
    [[ $EUID -eq 0 ]] || die "run as root"
    local t0=$EPOCHREALTIME
    [[ ! -d $STATE ]] || lock_state slurm
    select_daemons
    if ((${#NAMES[@]} == 0)) && [[ -v "SELECTED[slurmctld]" ]]; then
        cancel_jobs
    fi
    local rc=0
    stop_selected || rc=1
    if ((rc == 0)) && [[ -n $STARTED_FILE ]]; then
        rm -f -- "$STARTED_FILE"
    fi
    if ((PURGE)); then
        ((rc == 0)) || die "not purging $STATE: some daemons could not be stopped"
        purge_state .hpcbridge-slurm-state
    fi
    local elapsed
    elapsed=$(seconds_since "$t0")
    log "slurm-down done in ${elapsed}s"
    return "$rc"
}

main "$@"
