#!/usr/bin/env bash
# Stop the HTCondor pool and sshd started by condor-up.sh, by recorded PID.
#
# Usage (as root): condor-down.sh [--purge] [--started FILE] [DAEMON...]
#   DAEMON          condor_master and/or sshd: stop only those (e.g. `condor-down.sh sshd` to
#                   simulate an outage; condor-up.sh brings it back). Default: everything.
#   --started FILE  stop only the daemons whose pid files condor-up.sh --started FILE recorded,
#                   then remove FILE.
#   --purge         stop everything, then delete the whole state dir (rootfs cache included).
# Each daemon gets SIGTERM (graceful), then SIGQUIT (fast), then SIGKILL, and only while
# /proc/PID/root is our rootfs. Once no daemon of ours is left running, anything else still
# chrooted in the rootfs (ssh sessions, jobs) is ended too. Idempotent.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

DAEMONS=(sshd condor_master)
purge=0
started_file=
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --purge) purge=1; shift ;;
    --started) [ $# -ge 2 ] || die "--started needs a FILE argument"; started_file=$2; shift 2 ;;
    --started=*) started_file=${1#--started=}; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    sshd | condor_master) names+=("$1"); shift ;;
    *) die "unknown argument '$1' (usage: condor-down.sh [--purge] [--started FILE] [sshd|condor_master...])" ;;
  esac
done
[ -z "$started_file" ] || [ ${#names[@]} -eq 0 ] || die "give either --started FILE or DAEMON names, not both"
[ "$purge" = 0 ] || { [ -z "$started_file" ] && [ ${#names[@]} -eq 0 ]; } ||
  die "--purge stops everything: it takes no --started FILE and no DAEMON names"

[ "$(id -u)" -eq 0 ] || die "condor-down.sh must run as root"

STATE=${HPCBRIDGE_CONDOR_STATE:-/var/tmp/hpcbridge-condor}
if [ ! -d "$STATE" ]; then
  log "nothing to do: no state dir $STATE"
  [ -z "$started_file" ] || rm -f "$started_file"
  exit 0
fi
STATE=$(cd "$STATE" && pwd -P)
ROOTFS=$STATE/rootfs
PIDS=$STATE/pids
[ "$STATE" != / ] || die "refusing to work on HPCBRIDGE_CONDOR_STATE=/"

exec 9>"$STATE/lock"
flock -w 900 9 || die "timed out waiting for $STATE/lock (another condor-up.sh/condor-down.sh)"

# The root directory of PID is our rootfs, compared by device and inode: the daemons' root is
# the rootfs made the root of their mount namespace (pivot_root), where readlink says "/".
in_rootfs() {
  local want got
  want=$(stat -c %d:%i "$ROOTFS" 2>/dev/null) || return 1
  got=$(stat -L -c %d:%i "/proc/$1/root" 2>/dev/null) || return 1
  [ "$got" = "$want" ]
}

# True if PID runs BINARY (basename) chrooted in our rootfs. A zombie has no root link, so it
# counts as gone; the root check also guards against PID reuse.
is_ours() { # PID BINARY
  local exe
  in_rootfs "$1" || return 1
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  exe=${exe% (deleted)}
  [ "${exe##*/}" = "$2" ]
}

gone() { # PID...
  local p
  for p in "$@"; do
    ! in_rootfs "$p" || return 1
  done
}

# Sends each of SIGNALS in turn while any of the PIDs is still in our rootfs, waiting TERM_WAIT
# seconds after SIGTERM and a few seconds after the others.
terminate() { # TERM_WAIT "SIGNALS" PID...
  local term_wait=$1 sigs=$2 sig wait p alive prev=
  shift 2
  for sig in $sigs; do
    alive=()
    for p in "$@"; do in_rootfs "$p" && alive+=("$p"); done
    [ ${#alive[@]} -gt 0 ] || return 0
    [ "$sig" = TERM ] || log "still running after SIG$prev: ${alive[*]}; sending SIG$sig"
    kill -"$sig" "${alive[@]}" 2>/dev/null || true
    case $sig in TERM) wait=$term_wait ;; QUIT) wait=10 ;; KILL) wait=5 ;; esac
    wait_until "$wait" gone "${alive[@]}" && return 0
    prev=$sig
  done
  return 1
}

stop_daemon() { # PIDFILE
  local pidfile=$1 name pid kids=() k
  name=$(basename "$pidfile" .pid)
  case $name in sshd | condor_master) ;; *) log "ignoring unknown pid file $pidfile"; return 0 ;; esac
  if [ ! -f "$pidfile" ]; then
    log "$name: not running (no pid file)"
    return 0
  fi
  pid=$(cat "$pidfile")
  if [[ $pid =~ ^[0-9]+$ ]] && is_ours "$pid" "$name"; then
    # Collected first: once the daemon is gone they are reparented and no longer findable.
    # For sshd these are the open sessions, which outlive the listener otherwise.
    for k in $(descendants "$pid"); do in_rootfs "$k" && kids+=("$k"); done
    log "stopping $name (pid $pid)"
    # condor_master's graceful shutdown (SIGTERM) vacates running jobs first; SIGQUIT is its
    # fast shutdown. Only the daemons get SIGQUIT: condor_procd, for one, dumps core on it.
    terminate 60 "TERM QUIT KILL" "$pid" || die "$name (pid $pid) survived SIGKILL"
    if [ ${#kids[@]} -gt 0 ]; then
      terminate 5 "TERM KILL" "${kids[@]}" || die "processes of $name survived SIGKILL: ${kids[*]}"
    fi
  else
    log "$name: not running (stale pid file, pid $pid)"
  fi
  rm -f "$pidfile"
}

any_daemon_running() {
  local d pid
  for d in "${DAEMONS[@]}"; do
    pid=$(cat "$PIDS/$d.pid" 2>/dev/null) || continue
    [[ $pid =~ ^[0-9]+$ ]] && is_ours "$pid" "$d" && return 0
  done
  return 1
}

# Ends whatever is still chrooted in the rootfs (ssh sessions, jobs, a daemon whose pid file
# was lost), then makes sure nothing under the state dir is mounted here.
sweep() {
  local p leftovers=() mounts
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    in_rootfs "$p" && leftovers+=("$p")
  done
  if [ ${#leftovers[@]} -gt 0 ]; then
    log "ending leftover processes in the rootfs: ${leftovers[*]}"
    terminate 5 "TERM KILL" "${leftovers[@]}" || die "leftover processes survived SIGKILL: ${leftovers[*]}"
  fi
  mounts=$(awk -v s="$STATE" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  if [ -n "$mounts" ]; then
    log "unmounting what is left mounted under $STATE: ${mounts//$'\n'/ }"
    for p in $mounts; do umount -l "$p" || true; done
    mounts=$(awk -v s="$STATE" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo)
    [ -z "$mounts" ] || die "still mounted under $STATE: $mounts"
  fi
}

if [ -n "$started_file" ]; then
  if [ -f "$started_file" ]; then
    while IFS= read -r pidfile; do
      [ -n "$pidfile" ] || continue
      case $pidfile in
        "$PIDS"/*.pid) stop_daemon "$pidfile" ;;
        *) log "ignoring $pidfile: not a pid file of $STATE" ;;
      esac
    done < <(awk '!seen[$0]++' "$started_file")
  else
    log "nothing to do: no $started_file"
  fi
elif [ ${#names[@]} -gt 0 ]; then
  for d in "${names[@]}"; do stop_daemon "$PIDS/$d.pid"; done
else
  for d in "${DAEMONS[@]}"; do stop_daemon "$PIDS/$d.pid"; done
fi

if ! any_daemon_running; then
  sweep
fi
[ -z "$started_file" ] || rm -f "$started_file"

if [ "$purge" = 1 ]; then
  [ -e "$STATE/.hpcbridge-condor-state" ] || [ -z "$(ls -A "$STATE")" ] ||
    die "$STATE does not look like a condor-up.sh state dir (no .hpcbridge-condor-state): not deleting it"
  log "deleting $STATE"
  rm -rf --one-file-system -- "$STATE"
fi
log "done"
