#!/usr/bin/env bash
# Bring up a real HTCondor pool (master, collector, negotiator, schedd, startd) and an OpenSSH
# "submit host", all on 127.0.0.1. Bookworm has no HTCondor, so both run in (pivot_root into) a
# debootstrapped Debian rootfs (default trixie) kept in the state dir and reused by later runs.
#
# Usage (as root): condor-up.sh [--started FILE]
#   --started FILE  append the pid file of every daemon this invocation started to FILE
#                   (condor-down.sh --started FILE stops exactly those).
# Knobs: HPCBRIDGE_CONDOR_STATE (/var/tmp/hpcbridge-condor), _SUITE (trixie), _PORT (collector,
#   9618), _SSH_PORT (2618), _USER (submitter), _UID (2000), _CPUS (4), _SMOKE (1; 0 = no smoke
#   job), _NO_INSTALL (1 = install nothing: needs the rootfs already built), _MIRROR (default: the
#   Debian mirror of this machine's apt sources), _SCRATCH (/srv/hpcbridge-scratch/USER, a path
#   inside the rootfs; not under /tmp or /var/tmp, which jobs see as private directories).
# Idempotent: starts only what is not running (sshd again when its configuration changed), then
# waits for the pool and sshd to answer and writes $STATE/env with the connection details.
#
# What the submit host offers besides a key login, for the tests of site features:
#   - SSH user certificates: sshd trusts the user CA $STATE/ssh/user_ca.pub (through a copy in
#     the rootfs); the key $STATE/ssh/cert_key is in no authorized_keys file and logs in only
#     with its certificate cert_key-cert.pub (valid for 30 days, signed again when less than a
#     day is left), never with cert_key-expired-cert.pub (expired in 2020) or
#     cert_key-future-cert.pub (valid only from about 1000 days after signing). Note that
#     OpenSSH's client, given -i cert_key, also offers cert_key-cert.pub by itself.
#   - A record of every command: sshd's ForceCommand is /usr/local/libexec/hpcbridge-record-command
#     in the rootfs, which appends the command line the client asked for to
#     $ROOTFS/var/log/hpcbridge/commands.log (each record is the command's text followed by a NUL
#     byte and a newline; a session without a command leaves an empty record), then runs it as
#     sshd would have (exit status, stdin and output untouched).
#   - sshd logs at LogLevel VERBOSE to $STATE/log/sshd.log (with the certificate ID of a login).
#   - A scratch directory outside the home, the test user's alone (mode 700).
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
SCRATCH=${HPCBRIDGE_CONDOR_SCRATCH:-/srv/hpcbridge-scratch/$SUBMIT_USER}

for knob in PORT SSH_PORT SUBMIT_UID CPUS; do
  [[ ${!knob} =~ ^[0-9]+$ ]] || die "$knob must be a number, got '${!knob}'"
done
[[ $SUBMIT_USER =~ ^[a-z_][a-z0-9_-]*$ ]] || die "HPCBRIDGE_CONDOR_USER '$SUBMIT_USER' is not a valid user name"
[[ $SCRATCH =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
  die "HPCBRIDGE_CONDOR_SCRATCH must be an absolute path of letters, digits and ._-, got '$SCRATCH'"
case $SCRATCH/ in
  /tmp/* | /var/tmp/*) die "HPCBRIDGE_CONDOR_SCRATCH must not be under /tmp or /var/tmp: jobs have private ones" ;;
esac
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

# True if PID's root directory is our rootfs. The daemons' root is the rootfs made the root of
# their own mount namespace (pivot_root, see start_daemon), where readlink /proc/PID/root says "/":
# the directory is compared by device and inode, which works for chroot and pivot_root alike.
in_our_root() { # PID
  local want got
  want=$(stat -c %d:%i "$ROOTFS" 2>/dev/null) || return 1
  got=$(stat -L -c %d:%i "/proc/$1/root" 2>/dev/null) || return 1
  [ "$got" = "$want" ]
}

# True if PID runs BINARY (basename) in our rootfs. The root check also guards against PID
# reuse; until a starting wrapper has exec'd into the rootfs, root is still / (pitfall 7).
is_ours() {
  local exe
  in_our_root "$1" || return 1
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
    in_our_root "$pid" || continue
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
    if in_our_root "$pid"; then
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
# For the tests of site features (see the header): the certificate ID of each login in the log,
# logins with certificates of the test user CA, and a record of every command.
LogLevel VERBOSE
TrustedUserCAKeys /etc/ssh/hpcbridge_user_ca.pub
ForceCommand $RECORDER
EOF
}

# Makes the ed25519 key pair $SSHDIR/NAME{,.pub} with the rootfs's ssh-keygen, unless it exists.
make_key() { # NAME COMMENT
  [ ! -s "$SSHDIR/$1" ] || return 0
  rm -f "$ROOTFS/tmp/hpcbridge_$1" "$ROOTFS/tmp/hpcbridge_$1.pub"
  chroot_run ssh-keygen -q -t ed25519 -N '' -C "$2" -f "/tmp/hpcbridge_$1"
  mv "$ROOTFS/tmp/hpcbridge_$1" "$SSHDIR/$1"
  mv "$ROOTFS/tmp/hpcbridge_$1.pub" "$SSHDIR/$1.pub"
  chmod 600 "$SSHDIR/$1"
}

# The rootfs's ssh-keygen on a key or certificate given on stdin; TZ=UTC0 for `-L`'s times.
keygen_stdin() { # OPTION <FILE
  chroot_run TZ=UTC0 ssh-keygen "$1" -f -
}

# The user CA that sshd trusts, the key cert_key (in no authorized_keys file) and its three
# certificates, each signed again only when it no longer fits (cert_fits, given what
# `keygen_stdin -L` prints): after the CA or cert_key was made anew, or as time passes. Signing
# happens in the rootfs, in a directory of root's that is removed afterwards.
setup_certificates() {
  local mode cert work=/root/.hpcbridge-sign ca_fp key_fp
  local -A validity=([valid]=-5m:+30d [expired]=20200101:20200102 [future]=+1000d:+1001d)
  make_key user_ca hpcbridge-condor-user_ca
  make_key cert_key hpcbridge-condor-cert_key
  install -m 644 "$SSHDIR/user_ca.pub" "$ROOTFS/etc/ssh/hpcbridge_user_ca.pub"
  ca_fp=$(keygen_stdin -l <"$SSHDIR/user_ca.pub" | cut -d' ' -f2)
  key_fp=$(keygen_stdin -l <"$SSHDIR/cert_key.pub" | cut -d' ' -f2)
  CERT_ID=hpcbridge-condor-valid
  for mode in valid expired future; do
    cert=$SSHDIR/cert_key-$mode-cert.pub
    [ "$mode" != valid ] || cert=$SSHDIR/cert_key-cert.pub
    if [ -s "$cert" ] &&
      cert_fits "$(keygen_stdin -L <"$cert" 2>/dev/null)" "$mode" "$SUBMIT_USER" "$ca_fp" "$key_fp"; then
      continue
    fi
    log "signing the $mode certificate of cert_key for $SUBMIT_USER"
    rm -rf "$ROOTFS$work"
    install -d -m 700 "$ROOTFS$work"
    install -m 600 "$SSHDIR/user_ca" "$ROOTFS$work/user_ca"
    install -m 644 "$SSHDIR/cert_key.pub" "$ROOTFS$work/cert_key.pub"
    # ssh-keygen names the certificate after the public key it signs.
    chroot_run ssh-keygen -q -s "$work/user_ca" -I "hpcbridge-condor-$mode" -n "$SUBMIT_USER" \
      -V "${validity[$mode]}" "$work/cert_key.pub" </dev/null ||
      die "ssh-keygen could not sign the $mode certificate"
    install -m 644 "$ROOTFS$work/cert_key-cert.pub" "$cert"
    rm -rf "$ROOTFS$work"
  done
}

# The test sshd's ForceCommand (recorder_script), which records each command line in a log that
# is the test user's (the command runs as that user), mode 600, in a directory only root may
# write. The script is replaced atomically (write_file) and only when it changed, as sessions may
# be starting it.
setup_recorder() { # GID
  RECORDER=/usr/local/libexec/hpcbridge-record-command
  COMMAND_LOG=/var/log/hpcbridge/commands.log
  install -d -m 755 "$ROOTFS/usr/local/libexec" "$ROOTFS${COMMAND_LOG%/*}"
  [ -e "$ROOTFS$COMMAND_LOG" ] || : >"$ROOTFS$COMMAND_LOG"
  chown "$SUBMIT_UID:$1" "$ROOTFS$COMMAND_LOG"
  chmod 600 "$ROOTFS$COMMAND_LOG"
  recorder_script "$COMMAND_LOG" condor-up.sh | write_file "$ROOTFS$RECORDER" 755 root:root
}

# The scratch directory: outside the home, the test user's alone. Its parent is created (root's,
# mode 755) only when missing, so that pointing HPCBRIDGE_CONDOR_SCRATCH elsewhere never changes
# the mode of an existing directory.
setup_scratch() { # GID
  [ -d "$ROOTFS${SCRATCH%/*}" ] || chroot_run install -d -m 755 "${SCRATCH%/*}"
  chroot_run install -d -o "$SUBMIT_UID" -g "$1" -m 700 "$SCRATCH"
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
  setup_certificates
  setup_recorder "$gid"
  setup_scratch "$gid"
  write_sshd_config
}

# Starts NAME in the rootfs, in its own session and mount namespace where the rootfs is
# bind-mounted onto itself (HTCondor's per-job mount namespace needs / to be a mount point,
# pitfall 3), /proc, /sys (with the cgroup hierarchies) and a tmpfs on /dev/shm are mounted, and
# the rootfs becomes the namespace's root with pivot_root rather than chroot: the kernel refuses
# a chrooted process a new user namespace (EPERM), which rootless Podman and ch-run need in jobs
# and ssh sessions. Those mounts vanish with the namespace. Every step execs, so $!
# is the daemon's own PID. env --default-signal undoes the SIGINT/SIGQUIT ignore that bash gives
# background jobs, which the daemon would otherwise inherit.
start_daemon() { # NAME COMMAND...
  local name=$1 pid
  shift
  env --default-signal=INT,QUIT setsid unshare --mount --propagation private -- sh -c \
    'mount --bind "$0" "$0" && mount -t proc proc "$0/proc" && mount --rbind /sys "$0/sys" &&
     mount -t tmpfs -o mode=1777,nosuid,nodev shm "$0/dev/shm" &&
     cd "$0" && pivot_root . . && umount -l . && cd / &&
     exec /usr/bin/env -i PATH='"$CHROOT_PATH"' LANG=C.UTF-8 "$@"' \
    "$ROOTFS" "$@" </dev/null >>"$LOGS/$name.log" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  record_started "$started_file" "$PIDS/$name.pid"
  if ! wait_until 15 came_up "$pid" "$name"; then
    tail -n 20 "$LOGS/$name.log" >&2
    die "$name (pid $pid) did not come up in $ROOTFS (log: $LOGS/$name.log)"
  fi
  log "started $name (pid $pid)"
}

came_up() { # PID NAME
  is_ours "$1" "$2" && return 0
  lives "$1" && return 1
  tail -n 20 "$LOGS/$2.log" >&2
  die "$2 (pid $1) exited right after its start (log: $LOGS/$2.log)"
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

# sshd reads its configuration only when it starts: the one it started with is kept in
# $STATE/sshd_config.started, and a running sshd whose configuration has changed since is stopped
# (by PID, the listener only: open sessions end on their own) and started again.
ensure_sshd() {
  local config=$ROOTFS/etc/ssh/sshd_config.hpcbridge pid
  if daemon_running sshd; then
    cmp -s "$config" "$STATE/sshd_config.started" && return 0
    pid=$(cat "$PIDS/sshd.pid")
    log "sshd_config changed; restarting sshd (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_until 10 sshd_gone "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      wait_until 5 sshd_gone "$pid" || die "sshd (pid $pid) survived SIGKILL"
    fi
    rm -f "$PIDS/sshd.pid"
  fi
  claim_port "$SSH_PORT" "sshd"
  cp "$config" "$STATE/sshd_config.started"
  start_daemon sshd /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config.hpcbridge
}
sshd_gone() { ! is_ours "$1" sshd; }

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
      printf 'HPCBRIDGE_CONDOR_USER_CA=%q\n' "$SSHDIR/user_ca"
      printf 'HPCBRIDGE_CONDOR_CERT_KEY=%q\n' "$SSHDIR/cert_key"
      printf 'HPCBRIDGE_CONDOR_CERT=%q\n' "$SSHDIR/cert_key-cert.pub"
      printf 'HPCBRIDGE_CONDOR_CERT_ID=%q\n' "$CERT_ID"
      printf 'HPCBRIDGE_CONDOR_CERT_EXPIRED=%q\n' "$SSHDIR/cert_key-expired-cert.pub"
      printf 'HPCBRIDGE_CONDOR_CERT_FUTURE=%q\n' "$SSHDIR/cert_key-future-cert.pub"
      # On this machine (in the rootfs), unlike the scratch directory below.
      printf 'HPCBRIDGE_CONDOR_COMMAND_LOG=%q\n' "$ROOTFS$COMMAND_LOG"
      printf 'HPCBRIDGE_CONDOR_SSH_LOG=%q\n' "$LOGS/sshd.log"
      # As the test user sees it over SSH and in jobs; on this machine it is under the rootfs.
      printf 'HPCBRIDGE_CONDOR_SCRATCH=%q\n' "$SCRATCH"
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
