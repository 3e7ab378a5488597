# shellcheck shell=bash
# Shared helpers for the test-cluster bring-up/tear-down scripts (tests/clusters/*.sh).
# Source it; it sets no shell options and starts nothing. Processes are only ever ended by a
# recorded PID whose /proc/PID/exe is the expected binary, never by name.

log() {
    printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

# port_in_use PORT: true if some socket listens on TCP PORT (any address).
port_in_use() {
    command -v ss >/dev/null 2>&1 || die "ss (package iproute2) is needed to check port $1"
    [[ -n $(ss -Hltn "sport = :$1") ]]
}

# reserve_ports PORT|FIRST-LAST...: take these ports out of the kernel's choice of local ports
# for outgoing connections (net.ipv4.ip_local_reserved_ports; the list is a set, so adding a
# port twice is harmless, and it lasts until reboot). Where the ephemeral range starts low (1024
# on some machines), a client socket could otherwise sit on a daemon's port, and even in
# TIME_WAIT it makes the daemon's bind fail. Called before each daemon starts.
reserve_ports() {
    local file=/proc/sys/net/ipv4/ip_local_reserved_ports current wanted
    [[ -w $file ]] || return 0
    current=$(<"$file")
    wanted=$(IFS=,; printf '%s' "$*")
    printf '%s\n' "${current:+$current,}$wanted" >"$file" ||
        log "could not reserve ports $wanted; a daemon's bind may meet a client socket there"
}

# debian_mirror: print the URL of the Debian archive this machine's apt uses,
# taken from the stanza/line for the release suite itself (not -security/-updates). Prefers
# entries signed by Debian's archive keyring, so a third-party repo with the same suite name
# (e.g. "bookworm stable") is not picked.
debian_mirror() {
    local codename="" uri f
    if [[ -r /etc/os-release ]]; then
        # shellcheck disable=SC1091
        codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
    fi
    local -a deb822=() oneline=()
    for f in /etc/apt/sources.list.d/*.sources; do [[ -r $f ]] && deb822+=("$f"); done
    [[ -r /etc/apt/sources.list ]] && oneline+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list; do [[ -r $f ]] && oneline+=("$f"); done

    uri=""
    if ((${#deb822[@]})); then
        uri=$(awk -v codename="$codename" '
            function flush(   n, i, s, ok, rank) {
                if (types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no" && uris != "") {
                    ok = 0
                    n = split(suites, s, /[ \t]+/)
                    for (i = 1; i <= n; i++)
                        if ((codename != "" && s[i] == codename) || (codename == "" && s[i] != "" && s[i] !~ /[-\/]/)) ok = 1
                    if (ok && components ~ /(^|[ \t])main([ \t]|$)/) {
                        rank = (signedby == "" || signedby ~ /debian-archive-keyring/) ? 1 : 2
                        split(uris, u, /[ \t]+/)
                        if (!(rank in best)) best[rank] = u[1]
                    }
                }
                types = uris = suites = components = signedby = enabled = ""; key = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { if (key == "uris") uris = uris " " $1; next }
            {
                key = tolower(substr($0, 1, index($0, ":") - 1))
                val = substr($0, index($0, ":") + 1); gsub(/^[ \t]+|[ \t]+$/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "components") components = val
                else if (key == "signed-by") signedby = val
                else if (key == "enabled") enabled = val
            }
            END { flush(); if (1 in best) print best[1]; else if (2 in best) print best[2] }
        ' "${deb822[@]}")
    fi
    if [[ -z $uri ]] && ((${#oneline[@]})); then
        uri=$(awk -v codename="$codename" '
            $1 != "deb" { next }
            {
                line = $0; opts = ""
                if (match(line, /\[[^]]*\]/)) { opts = substr(line, RSTART, RLENGTH); line = substr(line, 1, RSTART - 1) substr(line, RSTART + RLENGTH) }
                n = split(line, f, /[ \t]+/)
                if (n < 4) next
                suite = f[3]
                if (!((codename != "" && suite == codename) || (codename == "" && suite !~ /[-\/]/))) next
                main = 0; for (i = 4; i <= n; i++) if (f[i] == "main") main = 1
                if (!main) next
                rank = (opts !~ /signed-by/ || opts ~ /debian-archive-keyring/) ? 1 : 2
                if (!(rank in best)) best[rank] = f[2]
            }
            END { if (1 in best) print best[1]; else if (2 in best) print best[2] }
        ' "${oneline[@]}")
    fi
    [[ -n $uri ]] || return 1
    printf '%s\n' "${uri%/}"
}

_APT_UPDATED=0

_apt_get() {
    DEBIAN_FRONTEND=noninteractive apt-get -q -y \
        -o DPkg::Lock::Timeout=600 \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "$@" </dev/null
}

_apt_update_once() {
    ((_APT_UPDATED)) && return 0
    log "apt-get update"
    _apt_get update >&2 || return 1
    _APT_UPDATED=1
}

# apt_install PKG...: install the packages that are not installed yet (no recommends). Runs
# apt-get update first when a package has no install candidate, or once after a failed install
# (stale lists point at .debs the mirror no longer has). Daemons are never started by postinst.
apt_install() {
    local -a missing=()
    local p status lock_fd
    # The SLURM and HTCondor bring-ups run side by side: one apt at a time on this machine.
    exec {lock_fd}>/var/tmp/hpcbridge-apt.lock
    flock "$lock_fd"
    for p in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [[ $status == installed ]] || missing+=("$p")
    done
    ((${#missing[@]})) || { exec {lock_fd}>&-; return 0; }

    local own_policy="" rc=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        own_policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' >"$own_policy"
        chmod 755 "$own_policy"
    fi
    log "installing: ${missing[*]}"
    local policy
    for p in "${missing[@]}"; do
        policy=$(apt-cache policy "$p" 2>/dev/null || true)
        if [[ $policy != *"Candidate: "* || $policy == *"Candidate: (none)"* ]]; then
            _apt_update_once || rc=$?
            break
        fi
    done
    if ((rc == 0)) && ! _apt_get install --no-install-recommends "${missing[@]}" >&2; then
        rc=1
        if ((!_APT_UPDATED)) && _apt_update_once; then
            _apt_get install --no-install-recommends "${missing[@]}" >&2 && rc=0
        fi
    fi
    [[ -z $own_policy ]] || rm -f "$own_policy"
    exec {lock_fd}>&-
    ((rc == 0)) || die "apt-get could not install: ${missing[*]}"
}

# pid_of PIDFILE: print the PID recorded in PIDFILE (whitespace around it ignored); fail when
# there is no such file or no number in it.
pid_of() {
    local pid
    [[ -r $1 ]] || return 1
    pid=$(<"$1")
    pid=${pid//[[:space:]]/}
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    echo "$pid"
}

# lives PID: the process PID exists and is no zombie, whatever program it runs. A daemon started
# through env, setsid, unshare and sh runs each of those in turn before its last exec, for long
# enough to be seen on a busy machine: it is starting, not gone.
lives() {
    local state
    state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $state != Z && $state != X ]]
}

# pid_alive PIDFILE EXPECTED_EXE: true if the PID in PIDFILE runs EXPECTED_EXE. Symlinks are
# resolved on both sides (Debian's slurmctld/slurmd are alternatives symlinks); a zombie has no
# exe link, so it counts as dead, as does a PID reused by another program.
pid_alive() {
    local pidfile=$1 exe=$2 pid want got
    pid=$(pid_of "$pidfile") || return 1
    want=$(readlink -f -- "$exe") || return 1
    got=$(readlink -f -- "/proc/$pid/exe" 2>/dev/null) || return 1
    # A binary replaced by a package upgrade shows up as "PATH (deleted)".
    got=${got% (deleted)}
    [[ $got == "$want" ]] || return 1
    lives "$pid"
}

# stop_pid PIDFILE EXPECTED_EXE: TERM the process if pid_alive, KILL it after ~10 s, and remove
# PIDFILE once it is gone. A missing pid file or a dead PID is not an error.
stop_pid() {
    local pidfile=$1 exe=$2 pid i
    if pid_alive "$pidfile" "$exe"; then
        pid=$(pid_of "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            pid_alive "$pidfile" "$exe" || break
            sleep 0.1
        done
        if pid_alive "$pidfile" "$exe"; then
            log "PID $pid ($exe) ignored SIGTERM for 10 s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                pid_alive "$pidfile" "$exe" || break
                sleep 0.1
            done
            pid_alive "$pidfile" "$exe" && { log "PID $pid survived SIGKILL"; return 1; }
        fi
    fi
    rm -f -- "$pidfile"
}

# wait_until SECONDS CMD...: run CMD every 0.2 s until it succeeds (return 0) or SECONDS pass
# (return 1).
wait_until() {
    local timeout=$1
    shift
    local deadline=$((${EPOCHREALTIME//[!0-9]/} + timeout * 1000000))
    while :; do
        "$@" && return 0
        ((${EPOCHREALTIME//[!0-9]/} < deadline)) || return 1
        sleep 0.2
    done
}

# record_started FILE PIDFILE: remember that this run started the daemon behind PIDFILE, so the
# caller can later stop exactly that (FILE empty = no bookkeeping).
record_started() {
    [[ -z $1 ]] || printf '%s\n' "$2" >>"$1"
}

# lists_pidfile FILE PIDFILE: true if FILE (written through record_started) lists PIDFILE; other
# lines are warned about and ignored, a missing FILE means that nothing was started.
lists_pidfile() {
    local line found=1
    [[ -e $1 ]] || { log "$1 does not exist: nothing was started"; return 1; }
    while IFS= read -r line || [[ -n $line ]]; do
        [[ -n $line ]] || continue
        if [[ $line == "$2" ]]; then
            found=0
        else
            log "WARNING: ignoring unknown pid file '$line' in $1"
        fi
    done <"$1"
    return "$found"
}

# All descendants of PID (children first found, recursively), from the ppid field of /proc/*/stat.
descendants() { # PID
  local -A children=()
  local f line pid ppid rest queue=("$1") cur
  for f in /proc/[0-9]*/stat; do
    { read -r line <"$f"; } 2>/dev/null || continue
    pid=${line%% *}
    rest=${line##*) }
    read -r _ ppid _ <<<"$rest"
    children[$ppid]+=" $pid"
  done
  while [ ${#queue[@]} -gt 0 ]; do
    cur=${queue[0]}
    queue=("${queue[@]:1}")
    for pid in ${children[$cur]:-}; do
      echo "$pid"
      queue+=("$pid")
    done
  done
}

# usage: print the running script's header comment (line 2 up to `set -euo`), its --help text.
usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[-1]}"
}

# parse_options up|down OPERAND ARG...: the options the up and down scripts share. --started FILE
# (or --started=FILE) sets STARTED_FILE, made absolute (realpath -m) in an up script; --purge
# (down scripts only) sets PURGE=1; -h/--help prints usage and exits. Another argument not
# starting with - goes to the function OPERAND; with OPERAND empty, any other argument is an error.
parse_options() {
    local kind=$1 operand=$2
    shift 2
    while (($#)); do
        case $1 in
            --purge)
                [[ $kind == down ]] || die "unknown argument: $1 (see --help)"
                # shellcheck disable=SC2034  # read by the down script
                PURGE=1
                shift
                ;;
            --started | --started=*)
                if [[ $1 == --started ]]; then
                    (($# >= 2)) || die "--started needs a file name"
                    STARTED_FILE=$2
                    shift
                else
                    STARTED_FILE=${1#*=}
                fi
                shift
                if [[ $kind == up ]]; then
                    STARTED_FILE=$(realpath -m -- "$STARTED_FILE")
                fi
                ;;
            -h | --help)
                usage
                exit 0
                ;;
            *)
                [[ -n $operand ]] || die "unknown argument: $1 (see --help)"
                [[ $1 != -* ]] || die "unknown option: $1 (see --help)"
                "$operand" "$1"
                shift
                ;;
        esac
    done
}

# seconds_since T0: the seconds (one decimal) from T0, an $EPOCHREALTIME, until now.
seconds_since() {
    awk -v a="${1//[!0-9]/}" -v b="${EPOCHREALTIME//[!0-9]/}" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'
}

# no_install: true if the script's NO_INSTALL knob is set (and not 0): never run apt-get.
no_install() {
    [[ -n $NO_INSTALL && $NO_INSTALL != 0 ]]
}

# write_file PATH MODE OWNER <content: replace PATH only if content, mode or owner differ.
# Sets WROTE=1 when it changed something.
# shellcheck disable=SC2034  # WROTE is read by the calling script
write_file() {
    local path=$1 mode=$2 owner=$3 tmp
    tmp=$(mktemp "$path.XXXXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    chown "$owner" "$tmp"
    if [[ -f $path ]] && cmp -s "$tmp" "$path" && [[ $(stat -c '%a %U:%G' "$path") == "$mode $owner" ]]; then
        rm -f "$tmp"
        WROTE=0
    else
        mv -f "$tmp" "$path"
        WROTE=1
    fi
}

# make_ssh_keys PREFIX NAME...: the ed25519 key pairs $STATE/ssh/NAME{,.pub} (comment
# PREFIX-NAME), each made only if missing; a missing .pub alone is derived from its key.
# shellcheck disable=SC2153  # STATE is the sourcing script's
make_ssh_keys() {
    local prefix=$1 k
    shift
    for k in "$@"; do
        if [[ ! -s $STATE/ssh/$k ]]; then
            rm -f "$STATE/ssh/$k" "$STATE/ssh/$k.pub"
            ssh-keygen -q -t ed25519 -N '' -C "$prefix-$k" -f "$STATE/ssh/$k" </dev/null
        elif [[ ! -s $STATE/ssh/$k.pub ]]; then
            ssh-keygen -y -f "$STATE/ssh/$k" >"$STATE/ssh/$k.pub"
        fi
        chmod 600 "$STATE/ssh/$k"
    done
}

# cert_fits INFO MODE USER CA_FP KEY_FP: INFO is `ssh-keygen -L` of a certificate, printed with
# TZ=UTC0. True if it certifies the key with fingerprint KEY_FP for USER alone, is signed by the CA
# with fingerprint CA_FP, and is still what MODE asks for: valid (valid now, a day or more left),
# expired (ended), future (starts 100 days or more from now).
cert_fits() {
    local info=$1 mode=$2 user=$3 ca_fp=$4 key_fp=$5 principals from="" to="" now
    [[ $info == *"Signing CA: ED25519 $ca_fp "* && $info == *"Public key: ED25519-CERT $key_fp"* ]] ||
        return 1
    principals=$(sed -n '/^ *Principals:/,/^ *Critical Options:/{/:/d;s/^ *//;p}' <<<"$info")
    [[ $principals == "$user" ]] || return 1
    read -r from to < <(sed -n 's/^ *Valid: from \([^ ]*\) to \([^ ]*\)$/\1 \2/p' <<<"$info") || true
    [[ -n $from && -n $to ]] || return 1
    from=$(date -u -d "$from" +%s 2>/dev/null) && to=$(date -u -d "$to" +%s 2>/dev/null) || return 1
    now=$(date +%s)
    case $mode in
        valid) ((from <= now && to - now >= 86400)) ;;
        expired) ((to < now)) ;;
        future) ((from - now >= 100 * 86400)) ;;
        *) return 1 ;;
    esac
}

# recorder_script LOG WRITER: print the test sshd's ForceCommand, written by WRITER (a script
# name). It records each command line, then runs it as sshd would have ("$SHELL -c COMMAND"; a
# login shell when there is none; the SFTP subsystem, which arrives as "internal-sftp", as
# sftp-server). A record is the command's text, a NUL byte and a newline, appended to LOG under
# flock so that concurrent sessions never interleave; a command that cannot be recorded is not run.
recorder_script() {
    cat <<EOF
#!/bin/bash
# Written by hpcbridge tests/clusters/$2: the test sshd's ForceCommand.
log=$1
cmd=\${SSH_ORIGINAL_COMMAND-}
if ! { flock 3 && printf '%s\\000\\n' "\$cmd" >&3; } 3>>"\$log"; then
    printf 'record-command: cannot append to %s; the command was not run\\n' "\$log" >&2
    exit 126
fi
shell=\${SHELL:-/bin/sh}
case \$cmd in
    '') exec -l "\$shell" ;;
    internal-sftp | 'internal-sftp '*) exec /usr/lib/openssh/sftp-server \${cmd#internal-sftp} ;;
    *) exec "\$shell" -c "\$cmd" ;;
esac
EOF
}

# lock_state NAME: hold $STATE/.lock on fd 9 (waiting up to 600 s), so that NAME-up.sh and
# NAME-down.sh never run at once on one state dir.
lock_state() {
    exec 9>"$STATE/.lock"
    flock -w 600 9 || die "another $1-up/$1-down holds $STATE/.lock"
}

# begin_up NAME ARG...: how an up script starts: parse its command line, insist on root, check its
# knobs (the script's validate_knobs), then create $STATE and lock it (lock_state NAME).
begin_up() {
    local name=$1
    shift
    parse_options up "" "$@"
    [[ $EUID -eq 0 ]] || die "run as root"
    validate_knobs
    install -d -m 755 "$STATE"
    lock_state "$name"
}

# stop_daemon PIDFILE EXE NAME IDLE [SESSIONS]: stop the daemon behind PIDFILE by its PID
# (stop_pid), logging "stopping NAME (pid N)"; when it is not running, log IDLE and why. With
# SESSIONS=1 (an sshd) its per-connection processes end too: they are collected first, as once
# the listener is gone they are reparented. Returns 1 if the daemon could not be stopped.
stop_daemon() {
    local pidfile=$1 exe=$2 name=$3 idle=$4 with_sessions=${5:-0} pid rc=0 sessions=()
    if pid_alive "$pidfile" "$exe"; then
        pid=$(pid_of "$pidfile")
        log "stopping $name (pid $pid)"
        ((with_sessions == 0)) || mapfile -t sessions < <(descendants "$pid")
        stop_pid "$pidfile" "$exe" || { log "ERROR: could not stop $name"; rc=1; }
        end_sessions "$exe" "${sessions[@]}"
    elif [[ -e $pidfile ]]; then
        log "$idle (stale pid file removed)"
        rm -f -- "$pidfile"
    else
        log "$idle (no pid file)"
    fi
    return "$rc"
}

# end_sessions EXE PID...: TERM, by PID, those of PIDs that still run EXE (the per-connection
# processes of a stopped sshd).
end_sessions() {
    local p exe
    exe=$(readlink -f "$1")
    shift
    for p in "$@"; do
        [[ $(readlink -f "/proc/$p/exe" 2>/dev/null) == "$exe" ]] && kill -TERM "$p" 2>/dev/null
    done
    return 0
}

# purge_state MARKER [BEFORE]: delete the state dir $STATE (if it exists), but only if it is an
# absolute path other than / and holds the file MARKER its up script put there. The function
# BEFORE, if given, runs just before the deletion.
purge_state() {
    [[ -e $STATE ]] || return 0
    [[ $STATE == /* && $STATE != / ]] || die "refusing to delete '$STATE'"
    [[ -e $STATE/$1 ]] ||
        die "refusing to delete $STATE: it has no $1 marker"
    [[ -z ${2:-} ]] || "$2"
    log "deleting $STATE"
    rm -rf -- "$STATE"
}
