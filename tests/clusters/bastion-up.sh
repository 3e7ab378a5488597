#!/usr/bin/env bash
# Idempotent bring-up of an SSH bastion (jump host) in front of the test clusters' login nodes:
# a second OpenSSH sshd on loopback, with its own host key and a jump-only user that may open
# TCP connections through it (ssh -J, ProxyCommand "ssh -W", paramiko's direct-tcpip channels)
# and do nothing else. Run as root after slurm-up.sh and/or condor-up.sh: it fronts each cluster
# whose $STATE/env exists (at least one) and adds the jump user.
#
# The bastion knows each login node by a name that only it resolves (slurm-login.hpcbridge.test,
# condor-login.hpcbridge.test): its sshd runs in a private mount namespace where a copy of
# /etc/hosts with those names is bind-mounted over /etc/hosts, so on the rest of the machine the
# names do not resolve, and a login that reaches a node by such a name went through the bastion.
# sshd logs at LogLevel DEBUG1, which records each forwarded connection as
#   server_request_direct_tcpip: originator ADDR port N, target NAME port PORT
#
# Usage: bastion-up.sh [--started FILE]
#   --started FILE  append the pid file of the sshd this run starts to FILE, so the caller can
#                   later stop exactly that (bastion-down.sh --started FILE).
# Knobs (environment): HPCBRIDGE_BASTION_STATE (/var/tmp/hpcbridge-bastion),
# HPCBRIDGE_BASTION_PORT (2230), HPCBRIDGE_BASTION_USER (jumper),
# HPCBRIDGE_BASTION_SLURM_NAME (slurm-login.hpcbridge.test), HPCBRIDGE_BASTION_CONDOR_NAME
# (condor-login.hpcbridge.test), HPCBRIDGE_BASTION_NO_INSTALL (set: never run apt-get), and the
# clusters' HPCBRIDGE_SLURM_STATE / HPCBRIDGE_CONDOR_STATE (where their env files are).
# On success $STATE/env (mode 600, KEY=value lines) holds the connection details: the bastion's
# address, user, key and known_hosts file, its log and pid file, and for each cluster it fronts
# the login node's name and port as asked through the bastion and known_hosts files naming the
# node so ([NAME]:PORT), one plain and one hashed (ssh-keygen -H).
#
# An outage, for a test: bastion-down.sh stops the bastion's sshd by PID together with the
# connections open through it; or send SIGTERM to the PID in HPCBRIDGE_BASTION_PIDFILE, which
# stops only the listener (open connections go on). Either way, bastion-up.sh (with no
# arguments) starts it again, with the same keys, names and port; a bastion that is running is
# restarted only when its configuration or its hosts file changed. (The integration tests'
# bastion fixture does the former with stop() and start().)
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_BASTION_STATE:-/var/tmp/hpcbridge-bastion}
PORT=${HPCBRIDGE_BASTION_PORT:-2230}
JUMP_USER=${HPCBRIDGE_BASTION_USER:-jumper}
SLURM_NAME=${HPCBRIDGE_BASTION_SLURM_NAME:-slurm-login.hpcbridge.test}
CONDOR_NAME=${HPCBRIDGE_BASTION_CONDOR_NAME:-condor-login.hpcbridge.test}
NO_INSTALL=${HPCBRIDGE_BASTION_NO_INSTALL:-}
SLURM_ENV=${HPCBRIDGE_SLURM_STATE:-/var/tmp/hpcbridge-slurm}/env
CONDOR_ENV=${HPCBRIDGE_CONDOR_STATE:-/var/tmp/hpcbridge-condor}/env

HOST=127.0.0.1
SSHD=/usr/sbin/sshd
NOLOGIN=/usr/sbin/nologin
PACKAGES=(openssh-server openssh-client iproute2 util-linux)

STARTED_FILE=""
STARTED=""
WROTE=0
CLUSTERS=()                   # the fronted clusters: slurm and/or condor
declare -A NAME=([slurm]=$SLURM_NAME [condor]=$CONDOR_NAME)
declare -A C_HOST=() C_PORT=() C_USER=() C_KEY=() C_KNOWN_HOSTS=()

validate_knobs() {
    [[ $PORT =~ ^[1-9][0-9]*$ ]] || die "HPCBRIDGE_BASTION_PORT must be a positive integer, got '$PORT'"
    [[ $JUMP_USER =~ ^[a-z_][a-z0-9_-]{0,30}$ ]] || die "invalid user name '$JUMP_USER'"
    [[ $STATE =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
        die "HPCBRIDGE_BASTION_STATE must be an absolute path of letters, digits and ._-, got '$STATE'"
    local n
    for n in "$SLURM_NAME" "$CONDOR_NAME"; do
        [[ $n =~ ^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$ ]] || die "invalid host name '$n'"
    done
    [[ $SLURM_NAME != "$CONDOR_NAME" ]] || die "the SLURM and HTCondor login nodes need two names"
}

install_packages() {
    local -a missing=()
    local f
    no_install || apt_install "${PACKAGES[@]}"
    for f in "$SSHD" /usr/bin/ssh /usr/bin/ssh-keygen /usr/bin/unshare /usr/bin/ss "$NOLOGIN"; do
        [[ -x $f ]] || missing+=("$f")
    done
    ((${#missing[@]} == 0)) || die "missing programs: ${missing[*]} (install: ${PACKAGES[*]})"
}

# env_value FILE KEY: the value of KEY in an env file written by a cluster's bring-up script.
env_value() {
    local value
    value=$(sed -n "s/^$2=//p" "$1" | tail -n 1)
    [[ -n $value ]] || die "$1 has no $2"
    printf '%s' "$value"
}

# The clusters to front: those whose bring-up script wrote its env file.
read_clusters() {
    local c file prefix
    for c in slurm condor; do
        if [[ $c == slurm ]]; then file=$SLURM_ENV prefix=HPCBRIDGE_SLURM; else file=$CONDOR_ENV prefix=HPCBRIDGE_CONDOR; fi
        if [[ ! -r $file ]]; then
            log "no $file: not fronting the $c login node"
            continue
        fi
        C_HOST[$c]=$(env_value "$file" "${prefix}_HOST")
        C_PORT[$c]=$(env_value "$file" "${prefix}_PORT")
        C_USER[$c]=$(env_value "$file" "${prefix}_USER")
        C_KEY[$c]=$(env_value "$file" "${prefix}_KEY")
        C_KNOWN_HOSTS[$c]=$(env_value "$file" "${prefix}_KNOWN_HOSTS")
        CLUSTERS+=("$c")
    done
    ((${#CLUSTERS[@]})) ||
        die "no test cluster is up (neither $SLURM_ENV nor $CONDOR_ENV exists): run slurm-up.sh and/or condor-up.sh first"
}

# The login nodes' names must resolve nowhere but on the bastion.
check_names_unknown() {
    local c
    for c in slurm condor; do
        if getent ahosts "${NAME[$c]}" >/dev/null 2>&1; then
            die "${NAME[$c]} resolves on this machine ($(getent ahosts "${NAME[$c]}" | head -n 1));" \
                "the bastion needs a name only it resolves: remove it or choose another" \
                "with HPCBRIDGE_BASTION_${c^^}_NAME"
        fi
    done
}

prepare_dirs() {
    install -d -m 755 "$STATE" "$STATE/etc" "$STATE/log" "$STATE/ssh"
    install -d -m 700 "$STATE/pids" "$STATE/run"
    install -d -m 755 /run/sshd
    touch "$STATE/.hpcbridge-bastion-state"
}

# The jump user: no shell (nologin), no password ("*": not "!", which sshd without PAM takes for
# a locked account and refuses even with a key), its key in authorized_keys with "restrict" and
# only port forwarding allowed back.
setup_user() {
    if ! id -u "$JUMP_USER" >/dev/null 2>&1; then
        log "creating user $JUMP_USER"
        useradd -m -s "$NOLOGIN" "$JUMP_USER"
    fi
    [[ $(getent passwd "$JUMP_USER" | cut -d: -f7) == "$NOLOGIN" ]] || usermod -s "$NOLOGIN" "$JUMP_USER"
    [[ $(getent shadow "$JUMP_USER" | cut -d: -f2) == '*' ]] || usermod -p '*' "$JUMP_USER"
    JUMP_HOME=$(getent passwd "$JUMP_USER" | cut -d: -f6)
    [[ -d $JUMP_HOME ]] || install -d -o "$JUMP_USER" -g "$(id -gn "$JUMP_USER")" -m 750 "$JUMP_HOME"
}

setup_ssh_keys() {
    local group line auth=$JUMP_HOME/.ssh/authorized_keys
    make_ssh_keys hpcbridge-bastion ssh_host_ed25519_key id_ed25519
    KEY=$STATE/ssh/id_ed25519
    KNOWN_HOSTS=$STATE/ssh/known_hosts
    known_host_line "$HOST" "$PORT" "$(cut -d' ' -f1,2 "$STATE/ssh/ssh_host_ed25519_key.pub")" |
        write_file "$KNOWN_HOSTS" 644 root:root

    # Added to what is there: a bastion with another state dir may share the user.
    group=$(id -gn "$JUMP_USER")
    line="restrict,port-forwarding $(cut -d' ' -f1,2 "$KEY.pub")"
    install -d -o "$JUMP_USER" -g "$group" -m 700 "$JUMP_HOME/.ssh"
    grep -qxF -- "$line" "$auth" 2>/dev/null || printf '%s\n' "$line" >>"$auth"
    chown "$JUMP_USER:$group" "$auth"
    chmod 600 "$auth"
}

# known_host_line HOST PORT "TYPE KEY": a known_hosts line; [HOST]:PORT unless PORT is 22.
known_host_line() {
    if [[ $2 == 22 ]]; then
        printf '%s %s\n' "$1" "$3"
    else
        printf '[%s]:%s %s\n' "$1" "$2" "$3"
    fi
}

# For each fronted login node, known_hosts files that name it as a client asks for it through the
# bastion: [NAME]:PORT and the node's host key (taken from the cluster's own known_hosts file),
# plain and hashed. The hashed file is made again only when the plain one changed (hashing
# salts each name afresh).
setup_login_known_hosts() {
    local c plain hashed hostkey out
    for c in "${CLUSTERS[@]}"; do
        plain=$STATE/ssh/${c}_known_hosts
        hashed=$STATE/ssh/${c}_known_hosts_hashed
        hostkey=$(awk 'NF >= 3 && $1 !~ /^#/ { print $2, $3; exit }' "${C_KNOWN_HOSTS[$c]}")
        [[ -n $hostkey ]] || die "no host key in ${C_KNOWN_HOSTS[$c]}"
        known_host_line "${NAME[$c]}" "${C_PORT[$c]}" "$hostkey" | write_file "$plain" 644 root:root
        if ((WROTE)) || [[ ! -s $hashed ]]; then
            cp "$plain" "$hashed.new"
            # (It warns that the backup it leaves, removed below, holds the names unhashed.)
            out=$(ssh-keygen -q -H -f "$hashed.new" 2>&1) || die "ssh-keygen -H failed: $out"
            rm -f "$hashed.new.old"
            chmod 644 "$hashed.new"
            mv -f "$hashed.new" "$hashed"
        fi
    done
}

# The bastion's /etc/hosts: this machine's, plus the login nodes' names.
write_hosts() {
    local c
    {
        cat /etc/hosts
        printf '# Added by hpcbridge tests/clusters/bastion-up.sh: names only the bastion resolves.\n'
        for c in slurm condor; do
            printf '%s %s\n' "${C_HOST[$c]:-$HOST}" "${NAME[$c]}"
        done
    } | write_file "$STATE/etc/hosts" 644 root:root
}

write_config() {
    write_file "$STATE/etc/sshd_config" 644 root:root <<EOF
# Written by hpcbridge tests/clusters/bastion-up.sh on every run.
Port $PORT
AddressFamily inet
ListenAddress $HOST
HostKey $STATE/ssh/ssh_host_ed25519_key
PidFile none
# DEBUG1 logs each forwarded connection (server_request_direct_tcpip ... target NAME port N).
LogLevel DEBUG1
UsePAM no
PermitRootLogin no
AllowUsers $JUMP_USER
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile .ssh/authorized_keys
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 64:30:128
# Jump only: TCP connections from the client to anywhere, nothing else.
AllowTcpForwarding local
PermitOpen any
AllowStreamLocalForwarding no
AllowAgentForwarding no
GatewayPorts no
PermitTunnel no
PermitTTY no
PermitUserRC no
X11Forwarding no
EOF
    "$SSHD" -t -f "$STATE/etc/sshd_config" || die "sshd rejects $STATE/etc/sshd_config"
}

PIDFILE_REL=pids/sshd.pid

running() {
    pid_alive "$STATE/$PIDFILE_REL" "$SSHD"
}

# What the running sshd was started with: its configuration and hosts file.
started_with() {
    cat "$STATE/etc/sshd_config" "$STATE/etc/hosts"
}

check_port() {
    if port_in_use "$PORT"; then
        ss -Hltnp "sport = :$PORT" >&2 || true
        die "port $PORT (for the bastion's sshd) is already taken by a process this script did" \
            "not start; stop that process or choose another port with HPCBRIDGE_BASTION_PORT"
    fi
    reserve_ports "$PORT"
}

# sshd in its own session and mount namespace, where $STATE/etc/hosts is bind-mounted over
# /etc/hosts; every step execs, so $! is sshd's own PID. env --default-signal undoes the
# SIGINT/SIGQUIT ignore that bash gives background jobs.
start_sshd() {
    local pidfile=$STATE/$PIDFILE_REL pid
    rm -f "$pidfile"
    log "starting the bastion's sshd on $HOST:$PORT"
    env --default-signal=INT,QUIT setsid unshare --mount --propagation private -- sh -c \
        'mount --bind "$0" /etc/hosts && exec "$1" -D -f "$2" -E "$3"' \
        "$STATE/etc/hosts" "$SSHD" "$STATE/etc/sshd_config" "$STATE/log/sshd.log" \
        </dev/null >>"$STATE/log/sshd.out" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$pidfile"
    record_started "$STARTED_FILE" "$pidfile"
    STARTED=sshd
    started_with >"$STATE/run/started-with"
    if ! wait_until 10 came_up "$pid"; then
        tail -n 15 "$STATE/log/sshd.out" "$STATE/log/sshd.log" >&2 || true
        die "the bastion's sshd (pid $pid) did not come up"
    fi
}

came_up() { # PID
    running && return 0
    lives "$1" && return 1
    tail -n 15 "$STATE/log/sshd.out" "$STATE/log/sshd.log" >&2 || true
    die "the bastion's sshd (pid $1) exited right after its start"
}

not_running() { ! running; }

bring_up() {
    # An sshd that was just sent SIGTERM may still be on its way out: no longer listening.
    if running && ! port_in_use "$PORT" && ! wait_until 5 not_running; then
        die "the bastion's sshd (pid $(<"$STATE/$PIDFILE_REL")) runs but does not listen on port $PORT"
    fi
    if running; then
        if cmp -s <(started_with) "$STATE/run/started-with"; then
            log "the bastion's sshd is already running"
            return 0
        fi
        log "the bastion's configuration or hosts file changed; restarting its sshd"
        stop_pid "$STATE/$PIDFILE_REL" "$SSHD" || die "could not stop the bastion's sshd"
    fi
    check_port
    start_sshd
}

# ssh_via_bastion CLUSTER CMD...: run CMD on the cluster's login node, reached by its bastion name.
ssh_via_bastion() {
    local c=$1
    shift
    ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none \
        -o ConnectTimeout=5 -o LogLevel=ERROR -o GlobalKnownHostsFile=/dev/null \
        -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$STATE/ssh/${c}_known_hosts" \
        -o ProxyCommand="ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none -o ConnectTimeout=5 -o LogLevel=ERROR -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o UserKnownHostsFile=$KNOWN_HOSTS -i $KEY -p $PORT -W %h:%p $JUMP_USER@$HOST" \
        -i "${C_KEY[$c]}" -p "${C_PORT[$c]}" "${C_USER[$c]}@${NAME[$c]}" "$@"
}

login_ok() { # CLUSTER
    running || { tail -n 15 "$STATE/log/sshd.log" >&2; die "the bastion's sshd died"; }
    [[ $(ssh_via_bastion "$1" 'id -un' </dev/null 2>/dev/null) == "${C_USER[$1]}" ]]
}

wait_ready() {
    local c
    for c in "${CLUSTERS[@]}"; do
        wait_until 30 login_ok "$c" || {
            ssh_via_bastion "$c" 'id -un' </dev/null || true
            tail -n 15 "$STATE/log/sshd.log" >&2
            die "no login to ${C_USER[$c]}@${NAME[$c]}:${C_PORT[$c]} through the bastion"
        }
    done
}

write_env() {
    local c upper
    {
        printf '%s=%q\n' \
            HPCBRIDGE_BASTION_STATE "$STATE" \
            HPCBRIDGE_BASTION_HOST "$HOST" \
            HPCBRIDGE_BASTION_PORT "$PORT" \
            HPCBRIDGE_BASTION_USER "$JUMP_USER" \
            HPCBRIDGE_BASTION_KEY "$KEY" \
            HPCBRIDGE_BASTION_KNOWN_HOSTS "$KNOWN_HOSTS" \
            HPCBRIDGE_BASTION_LOG "$STATE/log/sshd.log" \
            HPCBRIDGE_BASTION_PIDFILE "$STATE/$PIDFILE_REL"
        for c in "${CLUSTERS[@]}"; do
            upper=${c^^}
            printf '%s=%q\n' \
                "HPCBRIDGE_BASTION_${upper}_NAME" "${NAME[$c]}" \
                "HPCBRIDGE_BASTION_${upper}_PORT" "${C_PORT[$c]}" \
                "HPCBRIDGE_BASTION_${upper}_KNOWN_HOSTS" "$STATE/ssh/${c}_known_hosts" \
                "HPCBRIDGE_BASTION_${upper}_KNOWN_HOSTS_HASHED" "$STATE/ssh/${c}_known_hosts_hashed"
        done
    } | write_file "$STATE/env" 600 root:root
}

main() {
    local t0=$EPOCHREALTIME
    begin_up bastion "$@"

    install_packages
    read_clusters
    check_names_unknown
    prepare_dirs
    setup_user
    setup_ssh_keys
    setup_login_known_hosts
    write_hosts
    write_config
    bring_up
    wait_ready
    write_env

    local elapsed
    elapsed=$(seconds_since "$t0")
    local c fronted=()
    for c in "${CLUSTERS[@]}"; do fronted+=("${NAME[$c]}:${C_PORT[$c]}"); done
    log "bastion up in ${elapsed}s on $HOST:$PORT (started: ${STARTED:-nothing}), fronting" \
        "${fronted[*]}; details in $STATE/env"
}

main "$@"
