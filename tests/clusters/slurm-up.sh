#!/usr/bin/env bash
# Idempotent bring-up of a real single-node SLURM 22.05 cluster (munged, a private MariaDB,
# slurmdbd, slurmctld, slurmd) plus an OpenSSH sshd, all on loopback, for the test suite and CI.
# Run as root on a throwaway Debian 12 machine: it writes /etc/slurm/*.conf and
# /etc/munge/munge.key and adds the test user. Only daemons that are not running are started.
#
# Usage: slurm-up.sh [--started FILE]
#   --started FILE  append the pid file of every daemon this run starts to FILE, so the caller can
#                   later stop exactly those (slurm-down.sh --started FILE).
# Knobs (environment): HPCBRIDGE_SLURM_STATE (/var/tmp/hpcbridge-slurm), HPCBRIDGE_SLURM_SSH_PORT
# (2222), HPCBRIDGE_SLURM_DB_PORT (3306), HPCBRIDGE_SLURM_CTLD_PORT (6817),
# HPCBRIDGE_SLURM_SLURMD_PORT (6818), HPCBRIDGE_SLURM_DBD_PORT (6819), HPCBRIDGE_SLURM_USER
# (hpcuser), HPCBRIDGE_SLURM_CPUS (16), HPCBRIDGE_SLURM_MIN_JOB_AGE (30), HPCBRIDGE_SLURM_SMOKE
# (1; 0 skips the smoke job), HPCBRIDGE_SLURM_NO_INSTALL (set: never run apt-get),
# HPCBRIDGE_SLURM_SCRATCH (/srv/hpcbridge-scratch/USER).
# On success $STATE/env (mode 600, KEY=value lines) holds the connection details.
#
# What the login node offers besides a key login, for the tests of site features:
#   - SSH user certificates: sshd trusts the user CA $STATE/ssh/user_ca.pub; the key
#     $STATE/ssh/cert_key is in no authorized_keys file and logs in only with its certificate
#     cert_key-cert.pub (valid for 30 days, signed again when less than a day is left), never
#     with cert_key-expired-cert.pub (expired in 2020) or cert_key-future-cert.pub (valid only
#     from about 1000 days after signing). Note that OpenSSH's client, given -i cert_key, also
#     offers cert_key-cert.pub by itself.
#   - A record of every command: sshd's ForceCommand is $STATE/bin/record-command, which appends
#     the command line the client asked for to $STATE/log/commands.log (each record is the
#     command's text followed by a NUL byte and a newline; a session without a command leaves an
#     empty record), then runs it as sshd would have (exit status, stdin and output untouched).
#   - sshd logs at LogLevel VERBOSE to $STATE/log/sshd.log (with the certificate ID of a login).
#   - A scratch directory outside the home, the test user's alone (mode 700).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_SLURM_STATE:-/var/tmp/hpcbridge-slurm}
SSH_PORT=${HPCBRIDGE_SLURM_SSH_PORT:-2222}
DB_PORT=${HPCBRIDGE_SLURM_DB_PORT:-3306}
CTLD_PORT=${HPCBRIDGE_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${HPCBRIDGE_SLURM_SLURMD_PORT:-6818}
DBD_PORT=${HPCBRIDGE_SLURM_DBD_PORT:-6819}
TEST_USER=${HPCBRIDGE_SLURM_USER:-hpcuser}
CPUS=${HPCBRIDGE_SLURM_CPUS:-16}
MIN_JOB_AGE=${HPCBRIDGE_SLURM_MIN_JOB_AGE:-30}
SMOKE=${HPCBRIDGE_SLURM_SMOKE:-1}
NO_INSTALL=${HPCBRIDGE_SLURM_NO_INSTALL:-}
SCRATCH=${HPCBRIDGE_SLURM_SCRATCH:-/srv/hpcbridge-scratch/$TEST_USER}

CLUSTER=localcluster
ACCOUNT=research
# With limits enforced, sbatch takes only accounts of the user's associations: a bare --account
# in extraArgs takes the script's name ("script") as its value, and the test of that must see
# the job run.
SCRIPT_ACCOUNT=script
# A QOS of at most one running job per user: its second job waits with QOSMaxJobsPerUserLimit.
ONE_JOB_QOS=onejob
PARTITION=debug
HOST=127.0.0.1

. "$HERE/slurm-daemons.sh"
declare -A PORT_KNOB=(
    [mariadbd]=HPCBRIDGE_SLURM_DB_PORT
    [slurmdbd]=HPCBRIDGE_SLURM_DBD_PORT
    [slurmctld]=HPCBRIDGE_SLURM_CTLD_PORT
    [slurmd]=HPCBRIDGE_SLURM_SLURMD_PORT
    [sshd]=HPCBRIDGE_SLURM_SSH_PORT
)
declare -A PORT=(
    [mariadbd]=$DB_PORT
    [slurmdbd]=$DBD_PORT
    [slurmctld]=$CTLD_PORT
    [slurmd]=$SLURMD_PORT
    [sshd]=$SSH_PORT
)
PACKAGES=(slurmctld slurmd slurm-client slurmdbd slurm-wlm-mysql-plugin munge mariadb-server
    openssh-server iproute2)

# QOS and association limits are enforced, so that a job over one waits with its reason.
ENFORCE=limits,qos

STARTED_FILE=""
STARTED=()
WROTE=0

validate_knobs() {
    local v
    for v in SSH_PORT DB_PORT CTLD_PORT SLURMD_PORT DBD_PORT CPUS MIN_JOB_AGE; do
        [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
    done
    [[ $TEST_USER =~ ^[a-z_][a-z0-9_-]{0,30}$ ]] || die "invalid user name '$TEST_USER'"
    [[ $STATE == /* && $STATE != / ]] || die "HPCBRIDGE_SLURM_STATE must be an absolute path"
    [[ $SMOKE == 0 || $SMOKE == 1 ]] || die "HPCBRIDGE_SLURM_SMOKE must be 0 or 1"
    [[ $SCRATCH =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
        die "HPCBRIDGE_SLURM_SCRATCH must be an absolute path of letters, digits and ._-, got '$SCRATCH'"
}

install_packages() {
    local -a needed=("${EXE[@]}" /usr/bin/mariadb-install-db /usr/bin/mariadb /usr/bin/mariadb-admin
        /usr/bin/sacctmgr /usr/bin/sbatch /usr/bin/munge /usr/bin/ssh /usr/bin/ssh-keygen /usr/bin/ss)
    local -a missing=()
    local f
    if ! no_install; then
        apt_install "${PACKAGES[@]}"
    fi
    for f in "${needed[@]}"; do [[ -x $f ]] || missing+=("$f"); done
    ((${#missing[@]} == 0)) || die "missing programs: ${missing[*]} (install: ${PACKAGES[*]})"
    for f in slurm munge mysql; do
        id -u "$f" >/dev/null 2>&1 || die "system user '$f' is missing (created by the packages)"
    done
}

# SLURM binds to what the node name resolves to; it must be loopback so nothing listens outside.
resolve_node() {
    NODE=$(hostname -s 2>/dev/null || uname -n)
    NODE=${NODE%%.*}
    [[ -n $NODE ]] || die "cannot determine the host name"
    NODE_ADDR=$(getent ahostsv4 "$NODE" | awk 'NR == 1 { print $1 }' || true)
    if [[ -z $NODE_ADDR ]]; then
        log "host name '$NODE' does not resolve; adding '127.0.0.1 $NODE' to /etc/hosts"
        printf '127.0.0.1 %s\n' "$NODE" >>/etc/hosts
        NODE_ADDR=127.0.0.1
    fi
    [[ $NODE_ADDR == 127.* ]] ||
        die "host name '$NODE' resolves to $NODE_ADDR, not a loopback address; SLURM would listen there"
}

random_secret() {
    od -An -N18 -tx1 /dev/urandom | tr -d ' \n'
}

# secret NAME: print $STATE/secrets/NAME, creating it with a random value the first time.
secret() {
    local f=$STATE/secrets/$1
    if [[ ! -s $f ]]; then
        (umask 077 && random_secret >"$f.tmp" && mv -f "$f.tmp" "$f")
    fi
    cat "$f"
}

prepare_dirs() {
    install -d -m 755 "$STATE" "$STATE/etc" "$STATE/log" "$STATE/ssh" "$STATE/slurmd" "$STATE/bin"
    install -d -m 700 "$STATE/pids" "$STATE/secrets"
    install -d -o slurm -g slurm -m 755 "$STATE/run" "$STATE/slurmctld"
    install -d -o mysql -g mysql -m 750 "$STATE/mysql-run"
    # These daemons write their logs after dropping privileges and cannot create files in a
    # root-owned directory.
    local f
    for f in mariadb.err:mysql slurmctld.log:slurm slurmdbd.log:slurm; do
        [[ -e $STATE/log/${f%%:*} ]] || : >"$STATE/log/${f%%:*}"
        chown "${f#*:}:${f#*:}" "$STATE/log/${f%%:*}"
    done
    # No systemd/tmpfiles here to create the runtime directories.
    install -d -m 755 /run/sshd
    install -d -o munge -g munge -m 755 /run/munge
    install -d -o munge -g munge -m 700 /etc/munge /var/lib/munge /var/log/munge
    install -d -m 755 /etc/slurm
    touch "$STATE/.hpcbridge-slurm-state"
}

setup_munge_key() {
    local key=/etc/munge/munge.key
    if [[ ! -s $key ]]; then
        log "creating $key"
        rm -f "$key"
        (umask 077 && dd if=/dev/urandom of="$key" bs=1024 count=1 status=none)
    fi
    chown munge:munge "$key"
    chmod 400 "$key"
}

setup_user() {
    if ! id -u "$TEST_USER" >/dev/null 2>&1; then
        log "creating user $TEST_USER"
        useradd -m -s /bin/bash "$TEST_USER"
    fi
    USER_HOME=$(getent passwd "$TEST_USER" | cut -d: -f6)
    [[ -d $USER_HOME ]] || install -d -o "$TEST_USER" -g "$(id -gn "$TEST_USER")" -m 750 "$USER_HOME"

    # A real hash (not "!") also keeps sshd (UsePAM no) from refusing the account as locked.
    PASSWORD=$(secret password)
    local hash_file=$STATE/secrets/password.hash current
    current=$(getent shadow "$TEST_USER" | cut -d: -f2)
    if [[ ! -s $hash_file || $(<"$hash_file") != "$current" ]]; then
        printf '%s:%s\n' "$TEST_USER" "$PASSWORD" | chpasswd
        (umask 077 && getent shadow "$TEST_USER" | cut -d: -f2 >"$hash_file")
    fi
}

# The scratch directory: outside the home, the test user's alone. Its parent is created (root's,
# mode 755) only when missing, so that pointing HPCBRIDGE_SLURM_SCRATCH elsewhere never changes
# the mode of an existing directory.
setup_scratch() {
    local parent
    parent=$(dirname -- "$SCRATCH")
    [[ -d $parent ]] || install -d -m 755 "$parent"
    install -d -o "$TEST_USER" -g "$(id -gn "$TEST_USER")" -m 700 "$SCRATCH"
}

# user_ca (the CA of the user certificates) and cert_key are made like the other keys; cert_key
# goes into no authorized_keys file.
setup_ssh_keys() {
    make_ssh_keys hpcbridge-slurm ssh_host_ed25519_key id_ed25519 user_ca cert_key
    KEY=$STATE/ssh/id_ed25519
    KNOWN_HOSTS=$STATE/ssh/known_hosts
    printf '[%s]:%s %s\n' "$HOST" "$SSH_PORT" "$(cut -d' ' -f1,2 "$STATE/ssh/ssh_host_ed25519_key.pub")" |
        write_file "$KNOWN_HOSTS" 644 root:root

    local group pub
    group=$(id -gn "$TEST_USER")
    pub=$(cut -d' ' -f1,2 "$KEY.pub")
    install -d -o "$TEST_USER" -g "$group" -m 700 "$USER_HOME/.ssh"
    if ! grep -qF -- "$pub" "$USER_HOME/.ssh/authorized_keys" 2>/dev/null; then
        cat "$KEY.pub" >>"$USER_HOME/.ssh/authorized_keys"
    fi
    chown "$TEST_USER:$group" "$USER_HOME/.ssh/authorized_keys"
    chmod 600 "$USER_HOME/.ssh/authorized_keys"
}

# The three certificates of cert_key, each signed again only when it no longer fits (cert_fits):
# after the user CA or cert_key was made anew, or as time passes.
setup_certificates() {
    local ssh=$STATE/ssh mode cert tmp ca_fp key_fp
    local -A validity=([valid]=-5m:+30d [expired]=20200101:20200102 [future]=+1000d:+1001d)
    ca_fp=$(ssh-keygen -l -f "$ssh/user_ca.pub" | cut -d' ' -f2)
    key_fp=$(ssh-keygen -l -f "$ssh/cert_key.pub" | cut -d' ' -f2)
    CERT_ID=hpcbridge-slurm-valid
    for mode in valid expired future; do
        cert=$ssh/cert_key-$mode-cert.pub
        [[ $mode != valid ]] || cert=$ssh/cert_key-cert.pub
        if [[ -s $cert ]] &&
            cert_fits "$(TZ=UTC0 ssh-keygen -L -f "$cert" 2>/dev/null)" "$mode" "$TEST_USER" "$ca_fp" "$key_fp"; then
            continue
        fi
        log "signing the $mode certificate of cert_key for $TEST_USER"
        # ssh-keygen names the certificate after the public key it signs.
        tmp=$(mktemp -d "$ssh/sign.XXXXXX")
        cp "$ssh/cert_key.pub" "$tmp/cert_key.pub"
        ssh-keygen -q -s "$ssh/user_ca" -I "hpcbridge-slurm-$mode" -n "$TEST_USER" \
            -V "${validity[$mode]}" "$tmp/cert_key.pub" </dev/null ||
            die "ssh-keygen could not sign the $mode certificate"
        chmod 644 "$tmp/cert_key-cert.pub"
        mv -f "$tmp/cert_key-cert.pub" "$cert"
        rm -rf -- "$tmp"
    done
}

# The test sshd's ForceCommand (recorder_script), which records each command line in a log that
# is the test user's (the command runs as that user), mode 600, in a directory only root may write.
setup_recorder() {
    COMMAND_LOG=$STATE/log/commands.log
    RECORDER=$STATE/bin/record-command
    [[ -e $COMMAND_LOG ]] || : >"$COMMAND_LOG"
    chown "$TEST_USER:$(id -gn "$TEST_USER")" "$COMMAND_LOG"
    chmod 600 "$COMMAND_LOG"
    recorder_script "$COMMAND_LOG" slurm-up.sh | write_file "$RECORDER" 755 root:root
}

write_configs() {
    MYCNF=$STATE/etc/my.cnf
    write_file "$MYCNF" 644 root:root <<EOF
[mysqld]
datadir=$STATE/mysql
socket=$STATE/mysql-run/mysqld.sock
pid-file=$STATE/mysql-run/mysqld.pid
log-error=$STATE/log/mariadb.err
bind-address=127.0.0.1
port=$DB_PORT
skip-name-resolve
innodb_lock_wait_timeout=900

[client]
socket=$STATE/mysql-run/mysqld.sock
port=$DB_PORT
EOF
    MYCNF_CHANGED=$WROTE

    DB_PASS=$(secret db-password)
    # slurmdbd.conf: slurm.conf's CommunicationParameters does not reach slurmdbd, which would
    # otherwise bind 0.0.0.0.
    write_file /etc/slurm/slurmdbd.conf 600 slurm:slurm <<EOF
AuthType=auth/munge
DbdHost=$NODE
DbdAddr=$NODE_ADDR
DbdPort=$DBD_PORT
CommunicationParameters=NoInAddrAny
SlurmUser=slurm
DebugLevel=info
LogFile=$STATE/log/slurmdbd.log
PidFile=$STATE/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
    DBD_CHANGED=$WROTE

    # No cgroups: linuxproc/none plugins. config_overrides lets a small box advertise $CPUS CPUs.
    # NoCtldInAddrAny is needed on top of NoInAddrAny, else slurmctld binds 0.0.0.0.
    write_file /etc/slurm/slurm.conf 644 root:root <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$NODE($NODE_ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=slurm
SlurmdUser=root
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldDebug=info
SlurmdDebug=info
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MinJobAge=$MIN_JOB_AGE
KillWait=10
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$NODE_ADDR
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=$ENFORCE
JobCompType=jobcomp/none
MailProg=/bin/true
NodeName=$NODE NodeHostname=$NODE NodeAddr=$NODE_ADDR CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=4096 State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    SLURM_CHANGED=$WROTE

    write_file "$STATE/etc/sshd_config" 644 root:root <<EOF
Port $SSH_PORT
ListenAddress $HOST
HostKey $STATE/ssh/ssh_host_ed25519_key
PidFile $STATE/run/sshd.pid
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication yes
PermitEmptyPasswords no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
AllowUsers $TEST_USER
MaxStartups 64:30:128
X11Forwarding no
PrintMotd no
Subsystem sftp internal-sftp
# For the tests of site features (see the header): the certificate ID of each login in the log,
# logins with certificates of the test user CA, and a record of every command.
LogLevel VERBOSE
TrustedUserCAKeys $STATE/ssh/user_ca.pub
ForceCommand $RECORDER
EOF
    SSHD_CHANGED=$WROTE
    /usr/sbin/sshd -t -f "$STATE/etc/sshd_config" || die "sshd rejects $STATE/etc/sshd_config"
}

was_started() {
    local n
    for n in "${STARTED[@]}"; do
        [[ $n == "$1" ]] && return 0
    done
    return 1
}

pidfile_of() {
    printf '%s/pids/%s.pid' "$STATE" "$1"
}

running() {
    pid_alive "$(pidfile_of "$1")" "${EXE[$1]}"
}

log_tail() {
    local f
    for f in "$STATE/log/$1.out" "$STATE/log/$1.log"; do
        [[ -s $f ]] && { printf -- '--- last lines of %s:\n' "$f"; tail -n 15 "$f"; }
    done
    [[ $1 != mariadbd ]] || tail -n 15 "$STATE/log/mariadb.err"
}

# start_daemon NAME USER ARGS...: start NAME (as USER if non-empty) in the background and wait
# until /proc/PID/exe is the daemon itself: start-stop-daemon writes the pid file before the
# child has exec'd, so for a moment the PID is still start-stop-daemon.
start_daemon() {
    local name=$1 user=$2
    shift 2
    local pidfile exe=${EXE[$name]}
    pidfile=$(pidfile_of "$name")
    local -a chuid=()
    [[ -z $user ]] || chuid=(--chuid "$user")
    rm -f "$pidfile"
    log "starting $name"
    # fd 9 is the bring-up lock; the daemon must not keep holding it.
    start-stop-daemon --start --quiet --background --make-pidfile --pidfile "$pidfile" \
        --output "$STATE/log/$name.out" "${chuid[@]}" --exec "$exe" -- "$@" 9>&- ||
        die "start-stop-daemon could not start $name"
    wait_until 10 pid_alive "$pidfile" "$exe" || {
        log_tail "$name" >&2
        die "$name exited right after start"
    }
    record_started "$STARTED_FILE" "$pidfile"
    STARTED+=("$name")
}

# wait_ready NAME SECONDS CMD...: wait for CMD to succeed while NAME stays alive.
wait_ready() {
    local name=$1 timeout=$2
    shift 2
    local deadline=$((${EPOCHREALTIME//[!0-9]/} + timeout * 1000000))
    while :; do
        if ! running "$name"; then
            log_tail "$name" >&2
            die "$name died during start-up"
        fi
        "$@" && return 0
        if ((${EPOCHREALTIME//[!0-9]/} >= deadline)); then
            log_tail "$name" >&2
            die "$name not ready after ${timeout}s (waiting for: $*)"
        fi
        sleep 0.2
    done
}

munge_ok() {
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1
}

mariadb_ok() {
    mariadb-admin --defaults-file="$MYCNF" -uroot --connect-timeout=2 ping >/dev/null 2>&1
}

sacctmgr_ok() {
    port_in_use "$DBD_PORT" && sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1
}

ctld_ok() {
    port_in_use "$CTLD_PORT" && sinfo -h -o %P >/dev/null 2>&1
}

sacct_ok() {
    sacct -n -X -a -S now-1minutes -o JobID >/dev/null 2>&1
}

node_state() {
    sinfo -h -N -n "$NODE" -o %t 2>/dev/null | head -n 1 || true
}

node_usable() {
    [[ $(node_state) =~ ^(idle|mix|alloc|comp)$ ]]
}

ssh_user() {
    ssh -F /dev/null -p "$SSH_PORT" -i "$KEY" -o IdentitiesOnly=yes -o IdentityAgent=none \
        -o BatchMode=yes -o UserKnownHostsFile="$KNOWN_HOSTS" -o GlobalKnownHostsFile=/dev/null \
        -o StrictHostKeyChecking=yes -o ConnectTimeout=5 -o LogLevel=ERROR \
        "$TEST_USER@$HOST" "$@"
}

ssh_ok() {
    port_in_use "$SSH_PORT" && [[ $(ssh_user 'id -un' </dev/null 2>/dev/null) == "$TEST_USER" ]]
}

init_mariadb() {
    [[ -e $STATE/mysql.initialized ]] && return 0
    running mariadbd && die "mariadbd runs but $STATE/mysql.initialized is missing; run slurm-down.sh --purge"
    log "initialising the MariaDB data directory"
    rm -rf "$STATE/mysql"
    install -d -o mysql -g mysql -m 750 "$STATE/mysql"
    mariadb-install-db --defaults-file="$MYCNF" --user=mysql --auth-root-authentication-method=socket \
        --skip-test-db >"$STATE/log/mariadb-install-db.out" 2>&1 ||
        die "mariadb-install-db failed; see $STATE/log/mariadb-install-db.out"
    touch "$STATE/mysql.initialized"
}

setup_db_user() {
    local h
    for h in 127.0.0.1 localhost; do
        printf "CREATE USER IF NOT EXISTS 'slurm'@'%s' IDENTIFIED BY '%s';\n" "$h" "$DB_PASS"
        printf "ALTER USER 'slurm'@'%s' IDENTIFIED BY '%s';\n" "$h" "$DB_PASS"
        printf "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%s';\n" "$h"
    done | mariadb --defaults-file="$MYCNF" -uroot || die "could not create the MariaDB user slurm"
}

# The test user's associations, one "account|qos,qos" word each, sorted, on one line.
associations() {
    local assoc account qos
    assoc=$(sacctmgr -n -P show assoc where cluster="$CLUSTER" user="$TEST_USER" format=account,qos) ||
        return 1
    while IFS='|' read -r account qos; do
        [[ -n $account ]] || continue
        printf '%s|%s\n' "$account" "$(tr ',' '\n' <<<"$qos" | sort | paste -sd, -)"
    done <<<"$assoc" | sort | paste -sd' ' -
}

setup_accounting() {
    local want="$ACCOUNT|normal,$ONE_JOB_QOS $SCRIPT_ACCOUNT|normal,$ONE_JOB_QOS" assoc
    assoc=$(associations) || die "sacctmgr cannot query slurmdbd"
    [[ $assoc == "$want" ]] && return 0
    log "registering cluster $CLUSTER, accounts $ACCOUNT and $SCRIPT_ACCOUNT, QOS $ONE_JOB_QOS and user $TEST_USER in slurmdbd"
    if [[ -z $(sacctmgr -n -P show cluster where name="$CLUSTER" format=cluster) ]]; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
    local account
    for account in "$ACCOUNT" "$SCRIPT_ACCOUNT"; do
        if [[ -z $(sacctmgr -n -P show account where name="$account" format=account) ]]; then
            sacctmgr -i add account "$account" cluster="$CLUSTER" description=hpcbridge organization=hpcbridge >/dev/null
        fi
    done
    if [[ -z $(sacctmgr -n -P show qos where name="$ONE_JOB_QOS" format=name) ]]; then
        sacctmgr -i add qos "$ONE_JOB_QOS" MaxJobsPerUser=1 >/dev/null
    fi
    sacctmgr -i add user "$TEST_USER" account="$ACCOUNT,$SCRIPT_ACCOUNT" defaultaccount="$ACCOUNT" \
        cluster="$CLUSTER" >/dev/null 2>&1 || true
    sacctmgr -i modify user where name="$TEST_USER" cluster="$CLUSTER" set qos=normal,"$ONE_JOB_QOS" \
        defaultqos=normal >/dev/null 2>&1 || true
    assoc=$(associations)
    [[ $assoc == "$want" ]] ||
        die "sacctmgr could not give user $TEST_USER the accounts $ACCOUNT and $SCRIPT_ACCOUNT with QOS normal and $ONE_JOB_QOS (got: $assoc)"
}

# Whether the running slurmctld lacks a word of slurm.conf's enforcement (it shows
# "associations,limits,qos" for limits,qos): a change of AccountingStorageEnforce takes a restart
# of slurmctld (scontrol reconfigure keeps the old).
enforce_differs() {
    local running word
    running=$(scontrol show config 2>/dev/null | awk -F' = ' '/^AccountingStorageEnforce/ { print $2 }')
    [[ -n $running ]] || return 1
    for word in ${ENFORCE//,/ }; do
        [[ ,$running, == *",$word,"* ]] || return 0
    done
    return 1
}

check_ports() {
    local name port
    for name in "$@"; do
        port=${PORT[$name]:-}
        [[ -n $port ]] || continue
        if port_in_use "$port"; then
            ss -Hltnp "sport = :$port" >&2 || true
            die "port $port (for $name) is already taken by a process this script did not start;" \
                "stop that process or choose another port with ${PORT_KNOB[$name]}"
        fi
        reserve_ports "$port"
    done
}

bring_up() {
    local -a to_start=()
    local name
    if [[ $SSHD_CHANGED == 1 ]] && running sshd; then
        log "sshd_config changed; restarting sshd"
        stop_pid "$(pidfile_of sshd)" "${EXE[sshd]}"
    fi
    for name in "${DAEMONS[@]}"; do
        running "$name" || to_start+=("$name")
    done
    if ((${#to_start[@]} == 0)); then
        log "all daemons already running"
    else
        log "to start: ${to_start[*]}"
    fi
    check_ports "${to_start[@]}"
    if [[ $MYCNF_CHANGED == 1 || $DBD_CHANGED == 1 ]] && running slurmdbd; then
        log "WARNING: my.cnf/slurmdbd.conf changed while running; slurm-down.sh then slurm-up.sh applies it"
    fi

    running munged || start_daemon munged munge --foreground
    wait_ready munged 15 munge_ok

    init_mariadb
    running mariadbd || start_daemon mariadbd "" --defaults-file="$MYCNF" --user=mysql
    wait_ready mariadbd 60 mariadb_ok

    if ! running slurmdbd; then
        setup_db_user
        start_daemon slurmdbd "" -D
    fi
    wait_ready slurmdbd 60 sacctmgr_ok
    setup_accounting

    running slurmctld || start_daemon slurmctld "" -D
    wait_ready slurmctld 60 ctld_ok
    if [[ $SLURM_CHANGED == 1 ]] && ! was_started slurmctld && enforce_differs; then
        log "slurm.conf changed AccountingStorageEnforce; restarting slurmctld (its jobs are kept)"
        stop_pid "$(pidfile_of slurmctld)" "${EXE[slurmctld]}"
        start_daemon slurmctld "" -D
        wait_ready slurmctld 60 ctld_ok
    elif [[ $SLURM_CHANGED == 1 ]] && ! was_started slurmctld; then
        log "slurm.conf changed; scontrol reconfigure"
        scontrol reconfigure || log "WARNING: scontrol reconfigure failed"
    fi

    if running slurmd; then
        if was_started slurmctld; then
            # A new slurmctld leaves an already-running node "unknown" for ~4 s, until it asks the
            # node to register; SIGHUP (reconfigure) makes slurmd register at once.
            kill -HUP "$(<"$(pidfile_of slurmd)")" 2>/dev/null || true
        fi
    else
        start_daemon slurmd "" -D
    fi
    running sshd || start_daemon sshd "" -D -f "$STATE/etc/sshd_config" -E "$STATE/log/sshd.log"

    wait_node
    wait_ready slurmdbd 30 sacct_ok
    wait_ready sshd 30 ssh_ok
}

# The node may come back drained/down (e.g. after an unclean slurmd stop); resume it once.
wait_node() {
    local resumed=0 i state
    for ((i = 0; i < 300; i++)); do
        running slurmd || { log_tail slurmd >&2; die "slurmd died during start-up"; }
        node_usable && return 0
        state=$(node_state)
        if ((i >= 25 && !resumed)) && [[ $state =~ ^(down|drain|drng|fail)$ ]]; then
            log "node $NODE is '$state'; resuming it"
            scontrol update NodeName="$NODE" State=RESUME || true
            resumed=1
        fi
        sleep 0.2
    done
    sinfo -N -l >&2 || true
    log_tail slurmd >&2
    die "node $NODE is not idle after 60 s (state: $(node_state))"
}

smoke_job() {
    local id state i
    id=$(printf '#!/bin/sh\ntrue\n' |
        ssh_user sbatch --parsable --job-name=hpcbridge-smoke --output=/dev/null) ||
        die "smoke job: sbatch over ssh failed"
    id=${id%%;*}
    [[ $id =~ ^[0-9]+$ ]] || die "smoke job: unexpected sbatch output '$id'"
    for ((i = 0; i < 300; i++)); do
        state=$(sacct -n -X -P -j "$id" -o State 2>/dev/null | head -n 1 || true)
        case $state in
            COMPLETED)
                log "smoke job $id COMPLETED"
                return 0
                ;;
            FAILED* | CANCELLED* | TIMEOUT* | NODE_FAIL* | OUT_OF_MEMORY* | BOOT_FAIL* | DEADLINE* | PREEMPTED*)
                sacct -j "$id" >&2 || true
                die "smoke job $id ended $state"
                ;;
        esac
        sleep 0.2
    done
    squeue -j "$id" -t all >&2 || true
    die "smoke job $id did not reach COMPLETED in sacct within 60 s (last state: '${state:-none}')"
}

write_env() {
    {
        printf '%s=%q\n' \
            HPCBRIDGE_SLURM_STATE "$STATE" \
            HPCBRIDGE_SLURM_HOST "$HOST" \
            HPCBRIDGE_SLURM_PORT "$SSH_PORT" \
            HPCBRIDGE_SLURM_USER "$TEST_USER" \
            HPCBRIDGE_SLURM_KEY "$KEY" \
            HPCBRIDGE_SLURM_PASSWORD "$PASSWORD" \
            HPCBRIDGE_SLURM_KNOWN_HOSTS "$KNOWN_HOSTS" \
            HPCBRIDGE_SLURM_PARTITION "$PARTITION" \
            HPCBRIDGE_SLURM_CLUSTER "$CLUSTER" \
            HPCBRIDGE_SLURM_ONE_JOB_QOS "$ONE_JOB_QOS" \
            HPCBRIDGE_SLURM_MIN_JOB_AGE "$MIN_JOB_AGE" \
            HPCBRIDGE_SLURM_USER_CA "$STATE/ssh/user_ca" \
            HPCBRIDGE_SLURM_CERT_KEY "$STATE/ssh/cert_key" \
            HPCBRIDGE_SLURM_CERT "$STATE/ssh/cert_key-cert.pub" \
            HPCBRIDGE_SLURM_CERT_ID "$CERT_ID" \
            HPCBRIDGE_SLURM_CERT_EXPIRED "$STATE/ssh/cert_key-expired-cert.pub" \
            HPCBRIDGE_SLURM_CERT_FUTURE "$STATE/ssh/cert_key-future-cert.pub" \
            HPCBRIDGE_SLURM_COMMAND_LOG "$COMMAND_LOG" \
            HPCBRIDGE_SLURM_SSH_LOG "$STATE/log/sshd.log" \
            HPCBRIDGE_SLURM_SCRATCH "$SCRATCH"
    } | write_file "$STATE/env" 600 root:root
}

main() {
    local t0=$EPOCHREALTIME
    begin_up slurm "$@"

    install_packages
    resolve_node
    prepare_dirs
    setup_munge_key
    setup_user
    setup_scratch
    setup_ssh_keys
    setup_certificates
    setup_recorder
    write_configs
    bring_up
    if [[ $SMOKE == 1 ]]; then
        smoke_job
    fi
    write_env

    local elapsed
    elapsed=$(seconds_since "$t0")
    log "SLURM test cluster up in ${elapsed}s (started: ${STARTED[*]:-nothing}); details in $STATE/env"
    printf 'ssh -p %s -i %s -o UserKnownHostsFile=%s %s@%s sinfo\n' \
        "$SSH_PORT" "$KEY" "$KNOWN_HOSTS" "$TEST_USER" "$HOST"
}

main "$@"
