#!/usr/bin/env bash
# Bring up a real HTCondor pool (master, collector, negotiator, schedd, startd) and an OpenSSH
# "submit host", all on 127.0.0.1. Bookworm has no HTCondor, so both run chrooted in a
# debootstrapped Debian rootfs (default trixie) kept in the state dir and reused by later runs.
#
# Usage (as root): condor-up.sh [--started FILE]
#   --started FILE  append the pid file of every daemon this invocation started to FILE
#                   (condor-down.sh --started FILE stops exactly those).
# Knobs: HPCBRIDGE_CONDOR_STATE (/var/tmp/hpcbridge-condor), _SUITE (trixie), _PORT (collector,
#   9618), _SSH_PORT (2618), _USER (submitter), _UID (2000), _CPUS (4), _SMOKE (1; 0 = no smoke
#   job), _NO_INSTALL (1 = install nothing: needs the rootfs already built), _MIRROR (default: the
#   Debian mirror of this machine's apt sources).
# Idempotent: starts only what is not running, then waits for the pool and sshd to answer and
# writes $STATE/env with the connection details.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

started_file=
while [ $# -gt 0 ]; do
  case $1 in
    --started) [ $# -ge 2 ] || die "--started needs a FILE argument"; started_file=$2; shift 2 ;;
    --started=*) started_file=${1#--started=}; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$1' (usage: condor-up.sh [--started FILE])" ;;
  esac
done
if [ -n "$started_file" ]; then
  case $started_file in /*) ;; *) started_file=$PWD/$started_file ;; esac
fi

[ "$(id -u)" -eq 0 ] || die "condor-up.sh must run as root (it uses chroot, unshare and mount)"

STATE=${HPCBRIDGE_CONDOR_STATE:-/var/tmp/hpcbridge-condor}
SUITE=${HPCBRIDGE_CONDOR_SUITE:-trixie}
PORT=${HPCBRIDGE_CONDOR_PORT:-9618}
SSH_PORT=${HPCBRIDGE_CONDOR_SSH_PORT:-2618}
SUBMIT_USER=${HPCBRIDGE_CONDOR_USER:-submitter}
SUBMIT_UID=${HPCBRIDGE_CONDOR_UID:-2000}
CPUS=${HPCBRIDGE_CONDOR_CPUS:-4}
SMOKE=${HPCBRIDGE_CONDOR_SMOKE:-1}
NO_INSTALL=${HPCBRIDGE_CONDOR_NO_INSTALL:-0}

for knob in PORT SSH_PORT SUBMIT_UID CPUS; do
  [[ ${!knob} =~ ^[0-9]+$ ]] || die "$knob must be a number, got '${!knob}'"
done
[[ $SUBMIT_USER =~ ^[a-z_][a-z0-9_-]*$ ]] || die "HPCBRIDGE_CONDOR_USER '$SUBMIT_USER' is not a valid user name"
# $STATE/env names the SSH port HPCBRIDGE_CONDOR_PORT; exporting it into this script would make
# the collector and sshd fight for one port.
[ "$PORT" != "$SSH_PORT" ] ||
  die "HPCBRIDGE_CONDOR_PORT (collector) and HPCBRIDGE_CONDOR_SSH_PORT are both $PORT" \
    "(was \$STATE/env, whose HPCBRIDGE_CONDOR_PORT is the SSH port, exported into this shell?)"

install -d -m 700 "$STATE"
# /proc/PID/root shows the physical path, so compare against that.
STATE=$(cd "$STATE" && pwd -P)
ROOTFS=$STATE/rootfs
PIDS=$STATE/pids
LOGS=$STATE/log
SSHDIR=$STATE/ssh
mkdir -p "$PIDS" "$LOGS"
install -d -m 700 "$SSHDIR"
: >"$STATE/.hpcbridge-condor-state"

exec 9>"$STATE/lock"
flock -w 900 9 || die "timed out waiting for $STATE/lock (another condor-up.sh/condor-down.sh)"

# sid's openssh-server no longer pulls in the client, which the readiness check and smoke job use.
ROOTFS_PACKAGES="condor openssh-server openssh-client"
CHROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
T0=$SECONDS

# Runs a command as root in the rootfs; /proc is mounted in a throw-away mount namespace.
in_root() {
  unshare --mount --propagation private -- sh -c \
    'mount -t proc proc "$0/proc" && exec chroot "$0" /usr/bin/env -i PATH='"$CHROOT_PATH"' HOME=/root LANG=C.UTF-8 "$@"' \
    "$ROOTFS" "$@" 9>&-
}

# For tools that need no /proc (useradd, ssh-keygen, ...).
chroot_run() {
  chroot "$ROOTFS" /usr/bin/env -i PATH="$CHROOT_PATH" HOME=/root LANG=C.UTF-8 "$@" 9>&-
}

# True if PID runs BINARY (basename) chrooted in our rootfs. The root check also guards against
# PID reuse; until a starting wrapper has exec'd chroot, root is still / (pitfall 7).
is_ours() {
  local root exe
  root=$(readlink "/proc/$1/root" 2>/dev/null) || return 1
  [ "$root" = "$ROOTFS" ] || return 1
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  exe=${exe% (deleted)}
  [ "${exe##*/}" = "$2" ]
}

daemon_running() { # NAME
  local pid
  pid=$(cat "$PIDS/$1.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && is_ours "$pid" "$1"
}

# PIDs of processes chrooted in our rootfs whose executable basename matches the glob.
rootfs_pids() { # GLOB
  local p pid exe
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOTFS" ] || continue
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    exe=${exe% (deleted)}
    # shellcheck disable=SC2053
    [[ ${exe##*/} == $1 ]] && echo "$pid"
  done
  return 0
}

none_alive() { # GLOB
  [ -z "$(rootfs_pids "$1")" ]
}

# Listener PIDs (from ss) on a TCP port, one per line.
port_holders() {
  command -v ss >/dev/null || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u
}

# Refuses to go on if PORT is taken, unless the holder is a leftover chrooted in our rootfs.
claim_port() { # PORT WHAT
  local pid desc=
  port_in_use "$1" || { reserve_ports "$1"; return 0; }
  for pid in $(port_holders "$1"); do
    if [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$ROOTFS" ]; then
      log "port $1 is held by pid $pid, a leftover in our rootfs: stopping it"
      kill -TERM "$pid" 2>/dev/null || true
      wait_until 10 port_free "$1" || kill -KILL "$pid" 2>/dev/null || true
    else
      desc+=" pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120))"
    fi
  done
  if [ -n "$desc" ] || ! wait_until 5 port_free "$1"; then
    die "port $1 ($2) is taken by a process this script did not start:${desc:- unknown}." \
      "Stop it or choose another port (HPCBRIDGE_CONDOR_PORT / HPCBRIDGE_CONDOR_SSH_PORT)."
  fi
  reserve_ports "$1"
}
port_free() { ! port_in_use "$1"; }

build_rootfs() {
  local new=$STATE/rootfs.new mirror
  [ "$NO_INSTALL" != 1 ] || die "no rootfs in $ROOTFS and HPCBRIDGE_CONDOR_NO_INSTALL=1"
  mirror=${HPCBRIDGE_CONDOR_MIRROR:-$(debian_mirror)}
  [ -n "$mirror" ] || die "no Debian mirror found in the apt sources; set HPCBRIDGE_CONDOR_MIRROR"
  command -v debootstrap >/dev/null || apt_install debootstrap
  rm -rf --one-file-system "$new"
  log "building the $SUITE rootfs from $mirror (first run only: debootstrap + apt, ~50 s)"
  # In a private mount namespace the /proc etc. that debootstrap mounts vanish with it, even on failure.
  if ! unshare --mount --propagation private -- debootstrap --variant=minbase "$SUITE" "$new" "$mirror" \
    >"$LOGS/debootstrap.log" 2>&1 9>&-; then
    tail -n 20 "$LOGS/debootstrap.log" >&2
    die "debootstrap failed (log: $LOGS/debootstrap.log)"
  fi
  printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
  chmod 755 "$new/usr/sbin/policy-rc.d"
  # The archive can lag the clock: sid's Release expires after 7 days (pitfall 6).
  printf 'Acquire::Check-Valid-Until "false";\n' >"$new/etc/apt/apt.conf.d/99hpcbridge"
  cat /etc/resolv.conf >"$new/etc/resolv.conf" 2>/dev/null || true
  ROOTFS=$new install_packages
  mv "$new" "$ROOTFS"
  log "rootfs ready ($(du -sh "$ROOTFS" | cut -f1)) after $((SECONDS - T0)) s"
}

install_packages() {
  # shellcheck disable=SC2086
  if ! in_root sh -c 'apt-get -q update &&
      DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends "$@" &&
      apt-get clean' sh $ROOTFS_PACKAGES >"$LOGS/apt.log" 2>&1; then
    tail -n 20 "$LOGS/apt.log" >&2
    die "installing $ROOTFS_PACKAGES in the rootfs failed (log: $LOGS/apt.log)"
  fi
  printf 'suite=%s\npackages=%s\n' "$SUITE" "$ROOTFS_PACKAGES" >"$ROOTFS/.hpcbridge-rootfs"
}

ensure_rootfs() {
  if [ ! -e "$ROOTFS/.hpcbridge-rootfs" ]; then
    [ ! -e "$ROOTFS" ] || die "$ROOTFS exists but is not a rootfs built by this script; remove it (condor-down.sh --purge)"
    build_rootfs
  fi
  local have
  have=$(sed -n 's/^suite=//p' "$ROOTFS/.hpcbridge-rootfs")
  [ "$have" = "$SUITE" ] ||
    die "$ROOTFS holds a '$have' rootfs, not '$SUITE': use condor-down.sh --purge or another HPCBRIDGE_CONDOR_STATE"
  # A rootfs cached by an older version of this script may lack a package added since.
  if [ "$(sed -n 's/^packages=//p' "$ROOTFS/.hpcbridge-rootfs")" != "$ROOTFS_PACKAGES" ]; then
    [ "$NO_INSTALL" != 1 ] || die "the rootfs lacks some of: $ROOTFS_PACKAGES (and HPCBRIDGE_CONDOR_NO_INSTALL=1)"
    log "installing $ROOTFS_PACKAGES in the cached rootfs"
    install_packages
  fi
}

write_condor_config() {
  cat >"$ROOTFS/etc/condor/config.d/50-hpcbridge.config" <<EOF
# Written by hpcbridge tests/clusters/condor-up.sh on every run.
use ROLE: CentralManager
use ROLE: Submit
use ROLE: Execute
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
# Without this the shared port and collector also listen on the machine's global IPv6 address.
ENABLE_IPV6 = False
CONDOR_HOST = 127.0.0.1
COLLECTOR_PORT = $PORT
COLLECTOR_HOST = 127.0.0.1:$PORT
SHARED_PORT_PORT = $PORT
# The collector and schedd also listen on ports of their own, by default anywhere in the
# machine's ephemeral range (1024-65535 on some machines): keep them off other test servers' ports.
IN_LOWPORT = $((PORT + 1))
IN_HIGHPORT = $((PORT + 50))
# The starter's chirp I/O proxy listens on a random port that ignores IN_LOWPORT; nothing uses chirp.
ENABLE_CHIRP = False
SEC_DEFAULT_AUTHENTICATION = REQUIRED
SEC_DEFAULT_INTEGRITY = REQUIRED
ALLOW_DAEMON = condor@\$(UID_DOMAIN)
ALLOW_NEGOTIATOR = condor@\$(UID_DOMAIN)
ALLOW_ADMINISTRATOR = root@\$(UID_DOMAIN) condor@\$(UID_DOMAIN)
ALLOW_WRITE = *
ALLOW_READ = *
# Short cycles: a trivial job reaches condor_history in ~2 s instead of ~5 s.
SCHEDD_INTERVAL = 2
NEGOTIATOR_INTERVAL = 1
NEGOTIATOR_CYCLE_DELAY = 1
NEGOTIATOR_MIN_INTERVAL = 1
SCHEDD_MIN_INTERVAL = 1
STARTER_UPDATE_INTERVAL = 2
SHADOW_QUEUE_UPDATE_INTERVAL = 2
UPDATE_INTERVAL = 2
RUNBENCHMARKS = 0
NUM_CPUS = $CPUS
MAIL = /bin/true
EOF
}

write_sshd_config() {
  cat >"$ROOTFS/etc/ssh/sshd_config.hpcbridge" <<EOF
# Written by hpcbridge tests/clusters/condor-up.sh on every run.
Port $SSH_PORT
AddressFamily inet
ListenAddress 127.0.0.1
HostKey /etc/ssh/hpcbridge_host_ed25519_key
PidFile none
UsePAM no
PermitRootLogin no
AllowUsers $SUBMIT_USER
PubkeyAuthentication yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
AuthorizedKeysFile .ssh/authorized_keys
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
Subsystem sftp internal-sftp
EOF
}

configure() {
  local d home gid pw hostkey
  # The hostname must resolve without DNS (CI may have no resolver); the machine may have changed.
  # Listed first, it is HTCondor's FULL_HOSTNAME/UID_DOMAIN (else "localhost").
  printf '127.0.0.1\t%s localhost\n' "$(uname -n)" >"$ROOTFS/etc/hosts"
  write_condor_config
  # The package leaves these to systemd-tmpfiles; without them the startd exits (pitfall 2).
  for d in /var/lib/condor /var/lib/condor/execute /var/spool/condor /var/log/condor /run/condor /var/lock/condor; do
    chroot_run install -d -o condor -g condor -m 755 "$d"
  done
  install -d -m 755 "$ROOTFS/run/sshd"

  if ! chroot_run id -u "$SUBMIT_USER" >/dev/null 2>&1; then
    chroot_run useradd -m -U -u "$SUBMIT_UID" -s /bin/bash "$SUBMIT_USER"
  fi
  [ "$(chroot_run id -u "$SUBMIT_USER")" = "$SUBMIT_UID" ] ||
    die "user $SUBMIT_USER exists in the rootfs with another uid than $SUBMIT_UID (condor-down.sh --purge to rebuild)"
  home=$(chroot_run getent passwd "$SUBMIT_USER" | cut -d: -f6)
  gid=$(chroot_run id -g "$SUBMIT_USER")

  if [ ! -s "$STATE/password" ]; then
    (umask 077 && head -c 48 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | cut -c1-24 >"$STATE/password")
  fi
  pw=$(cat "$STATE/password")
  # Also unlocks the account: with UsePAM no, sshd rejects useradd's '!' password (pitfall 4).
  printf '%s:%s\n' "$SUBMIT_USER" "$pw" | chroot_run chpasswd

  hostkey=/etc/ssh/hpcbridge_host_ed25519_key
  if [ ! -s "$ROOTFS$hostkey" ]; then
    chroot_run ssh-keygen -q -t ed25519 -N '' -C hpcbridge-condor-host -f "$hostkey"
  fi
  if [ ! -s "$SSHDIR/id_ed25519" ]; then
    rm -f "$ROOTFS/tmp/hpcbridge_id_ed25519" "$ROOTFS/tmp/hpcbridge_id_ed25519.pub"
    chroot_run ssh-keygen -q -t ed25519 -N '' -C "$SUBMIT_USER@hpcbridge-condor" -f /tmp/hpcbridge_id_ed25519
    mv "$ROOTFS/tmp/hpcbridge_id_ed25519" "$SSHDIR/id_ed25519"
    mv "$ROOTFS/tmp/hpcbridge_id_ed25519.pub" "$SSHDIR/id_ed25519.pub"
    chmod 600 "$SSHDIR/id_ed25519"
  fi
  install -d -o "$SUBMIT_UID" -g "$gid" -m 700 "$ROOTFS$home/.ssh"
  install -o "$SUBMIT_UID" -g "$gid" -m 600 "$SSHDIR/id_ed25519.pub" "$ROOTFS$home/.ssh/authorized_keys"
  if [ "$SSH_PORT" = 22 ]; then
    printf '127.0.0.1 %s\n' "$(cut -d' ' -f1,2 "$ROOTFS$hostkey.pub")" >"$SSHDIR/known_hosts"
  else
    printf '[127.0.0.1]:%s %s\n' "$SSH_PORT" "$(cut -d' ' -f1,2 "$ROOTFS$hostkey.pub")" >"$SSHDIR/known_hosts"
  fi
  # Copies for the ssh client inside the rootfs, used for the readiness check and the smoke job
  # (the host may have no ssh client).
  install -d -m 700 "$ROOTFS/root/.ssh"
  install -m 600 "$SSHDIR/id_ed25519" "$ROOTFS/root/.ssh/hpcbridge_id_ed25519"
  install -m 600 "$SSHDIR/known_hosts" "$ROOTFS/root/.ssh/hpcbridge_known_hosts"
  write_sshd_config
}

# Starts NAME chrooted in the rootfs, in its own session and mount namespace where the rootfs is
# bind-mounted onto itself (HTCondor's per-job mount namespace needs / to be a mount point,
# pitfall 3) and /proc is mounted; those mounts vanish with the namespace. Every step execs, so
# $! is the daemon's own PID. env --default-signal undoes the SIGINT/SIGQUIT ignore that bash
# gives background jobs, which the daemon would otherwise inherit.
start_daemon() { # NAME COMMAND...
  local name=$1 pid
  shift
  env --default-signal=INT,QUIT setsid unshare --mount --propagation private -- sh -c \
    'mount --bind "$0" "$0" && mount -t proc proc "$0/proc" && exec chroot "$0" /usr/bin/env -i PATH='"$CHROOT_PATH"' LANG=C.UTF-8 "$@"' \
    "$ROOTFS" "$@" </dev/null >>"$LOGS/$name.log" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  record_started "$started_file" "$PIDS/$name.pid"
  if ! wait_until 15 came_up "$pid" "$name"; then
    tail -n 20 "$LOGS/$name.log" >&2
    die "$name (pid $pid) did not come up chrooted in $ROOTFS (log: $LOGS/$name.log)"
  fi
  log "started $name (pid $pid)"
}

came_up() { # PID NAME
  is_ours "$1" "$2" && return 0
  local state
  state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || state=gone
  case $state in
    Z | X | gone)
      tail -n 20 "$LOGS/$2.log" >&2
      die "$2 (pid $1) exited right after its start (log: $LOGS/$2.log)"
      ;;
  esac
  return 1
}

ensure_condor() {
  if daemon_running condor_master; then
    return 0
  fi
  # A master that died hard leaves its daemons running, holding the port: they are ours to end.
  # Not SIGQUIT: condor_procd is no DaemonCore daemon and dumps core on it.
  local strays
  mapfile -t strays < <(rootfs_pids 'condor_*')
  if [ ${#strays[@]} -gt 0 ]; then
    log "ending leftover HTCondor processes in the rootfs: ${strays[*]}"
    kill -TERM "${strays[@]}" 2>/dev/null || true
    if ! wait_until 10 none_alive 'condor_*'; then
      mapfile -t strays < <(rootfs_pids 'condor_*')
      kill -KILL "${strays[@]}" 2>/dev/null || true
    fi
  fi
  claim_port "$PORT" "HTCondor collector/shared port"
  reserve_ports "$((PORT + 1))-$((PORT + 50))" # IN_LOWPORT-IN_HIGHPORT of the daemons
  start_daemon condor_master /usr/sbin/condor_master -f
}

ensure_sshd() {
  if daemon_running sshd; then
    return 0
  fi
  claim_port "$SSH_PORT" "sshd"
  start_daemon sshd /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config.hpcbridge
}

ssh_cmd() {
  in_root ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o ConnectTimeout=5 \
    -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/root/.ssh/hpcbridge_known_hosts \
    -i /root/.ssh/hpcbridge_id_ed25519 -p "$SSH_PORT" "$SUBMIT_USER@127.0.0.1" "$@"
}
# The probes give up at once (die) when the daemon behind them has died.
master_alive() {
  daemon_running condor_master ||
    die "condor_master died (logs: $LOGS/condor_master.log, $ROOTFS/var/log/condor/MasterLog)"
}
slot_advertised() { master_alive && in_root condor_status -af Name 2>/dev/null | grep -q '^slot1@'; }
schedd_answers() { master_alive && in_root condor_q -totals >/dev/null 2>&1; }
ssh_works() {
  if ! daemon_running sshd; then
    tail -n 20 "$LOGS/sshd.log" >&2
    die "sshd died (log: $LOGS/sshd.log)"
  fi
  ssh_cmd true </dev/null >/dev/null 2>&1
}

wait_ready() {
  local t=$SECONDS
  wait_until 90 slot_advertised || die "no slot advertised after 90 s (logs: $ROOTFS/var/log/condor/StartLog, CollectorLog)"
  wait_until 60 schedd_answers || die "condor_q -totals does not answer after 60 s (log: $ROOTFS/var/log/condor/SchedLog)"
  wait_until 30 ssh_works || {
    tail -n 20 "$LOGS/sshd.log" >&2
    die "ssh $SUBMIT_USER@127.0.0.1 -p $SSH_PORT does not work (log: $LOGS/sshd.log)"
  }
  log "pool ready (slot advertised, schedd answering, ssh login works) in $((SECONDS - t)) s"
}

smoke_job() {
  local t=$SECONDS ids cluster result
  ids=$(ssh_cmd condor_submit -terse <<'EOF'
executable = /bin/true
transfer_executable = false
batch_name = hpcbridge-smoke
queue
EOF
  ) || die "smoke job: condor_submit over ssh failed"
  cluster=${ids%%.*}
  [[ $cluster =~ ^[0-9]+$ ]] || die "smoke job: unexpected condor_submit -terse output '$ids'"
  # One ssh session polls until the job is in the history (completed jobs leave the queue at once).
  result=$(ssh_cmd sh -s "$cluster" <<'EOF'
end=$(( $(date +%s) + 90 ))
while [ "$(date +%s)" -lt "$end" ]; do
  h=$(condor_history "$1.0" -af JobStatus ExitCode)
  if [ -n "$h" ]; then echo "$h"; exit 0; fi
  if [ "$(condor_q "$1.0" -af JobStatus)" = 5 ]; then echo "held: $(condor_q "$1.0" -af HoldReason)"; exit 0; fi
  sleep 0.2
done
echo "not finished after 90 s"
EOF
  ) || die "smoke job: polling over ssh failed"
  [ "$result" = "4 0" ] || die "smoke job $cluster.0: expected 'JobStatus ExitCode' = '4 0', got '$result'"
  log "smoke job $cluster.0 completed over ssh in $((SECONDS - t)) s"
}

write_env() {
  local version=$1 tmp=$STATE/env.tmp
  (
    umask 077
    {
      printf 'HPCBRIDGE_CONDOR_STATE=%q\n' "$STATE"
      printf 'HPCBRIDGE_CONDOR_ROOTFS=%q\n' "$ROOTFS"
      printf 'HPCBRIDGE_CONDOR_HOST=127.0.0.1\n'
      printf 'HPCBRIDGE_CONDOR_PORT=%q\n' "$SSH_PORT"
      printf 'HPCBRIDGE_CONDOR_USER=%q\n' "$SUBMIT_USER"
      printf 'HPCBRIDGE_CONDOR_KEY=%q\n' "$SSHDIR/id_ed25519"
      printf 'HPCBRIDGE_CONDOR_PASSWORD=%q\n' "$(cat "$STATE/password")"
      printf 'HPCBRIDGE_CONDOR_KNOWN_HOSTS=%q\n' "$SSHDIR/known_hosts"
      printf 'HPCBRIDGE_CONDOR_VERSION=%q\n' "$version"
    } >"$tmp"
  )
  mv -f "$tmp" "$STATE/env"
}

if [ "$NO_INSTALL" != 1 ]; then
  command -v ss >/dev/null || apt_install iproute2
fi
ensure_rootfs
configure
ensure_condor
ensure_sshd
wait_ready
version=$(in_root condor_version | sed -n 's/^\$CondorVersion: \([^ ]*\) .*/\1/p')
[ -n "$version" ] || die "cannot read the HTCondor version (condor_version)"
if [ "$SMOKE" != 0 ]; then
  smoke_job
fi
write_env "$version"

cat <<EOF
HTCondor $version pool is up (state $STATE, $((SECONDS - T0)) s).
  ssh     : ssh -p $SSH_PORT -i $SSHDIR/id_ed25519 -o UserKnownHostsFile=$SSHDIR/known_hosts $SUBMIT_USER@127.0.0.1 condor_q
  no ssh  : chroot $ROOTFS runuser -u $SUBMIT_USER -- condor_q
  logs    : $LOGS/  $ROOTFS/var/log/condor/
  env     : $STATE/env
  stop    : $here/condor-down.sh [--purge]
EOF
