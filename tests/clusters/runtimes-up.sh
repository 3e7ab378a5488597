#!/usr/bin/env bash
# Idempotent set-up of the container runtimes the container tests use on both test clusters:
# rootless Podman (with runc and uidmap) and Charliecloud (ch-image, ch-convert, ch-run), on this
# machine (the SLURM cluster's login and compute node) and in the HTCondor pool's rootfs (where
# its jobs run). It starts no daemon; run it after slurm-up.sh and condor-up.sh, which create the
# users, and after registry-up.sh, whose test CA it makes sure the rootfs trusts.
# For the SLURM test user and the HTCondor submitter it writes:
#   - /etc/subuid and /etc/subgid entries (in the rootfs's files for the submitter), 65536 ids
#     each, added only when the user has none;
#   - ~/.config/containers/containers.conf: runc (crun cannot use the hybrid cgroup v1 hierarchy
#     here), cgroupfs (no systemd), the host's network (slirp4netns and pasta need /dev/net/tun,
#     which is root's alone here) and the file events logger (no journald);
#   - a git identity in ~/.gitconfig, when it has none: ch-image's build cache commits with git.
# A cluster that is not there (no user, no rootfs) is skipped with a message. In the pool, rootless
# Podman and ch-run need a user namespace, which the kernel refuses a chrooted process: they work
# because condor-up.sh starts the pool's daemons with pivot_root into the rootfs, not chroot.
#
# Usage (as root): runtimes-up.sh
# Knobs (environment): HPCBRIDGE_RUNTIMES_NO_INSTALL (set: never run apt-get, here or in the
# rootfs), HPCBRIDGE_SLURM_USER (hpcuser), HPCBRIDGE_CONDOR_STATE (/var/tmp/hpcbridge-condor),
# HPCBRIDGE_CONDOR_USER (submitter).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

NO_INSTALL=${HPCBRIDGE_RUNTIMES_NO_INSTALL:-}
SLURM_USER=${HPCBRIDGE_SLURM_USER:-hpcuser}
CONDOR_STATE=${HPCBRIDGE_CONDOR_STATE:-/var/tmp/hpcbridge-condor}
CONDOR_USER=${HPCBRIDGE_CONDOR_USER:-submitter}
# charliecloud pulls in buildah and python3-lark (ch-image) and squashfuse (ch-run); git is only
# a recommendation of ch-image's but its build cache needs it.
PACKAGES=(podman uidmap runc charliecloud git ca-certificates)
PROGRAMS=(/usr/bin/podman /usr/bin/newuidmap /usr/bin/newgidmap /usr/sbin/runc /usr/bin/ch-image
    /usr/bin/ch-convert /usr/bin/ch-run /usr/bin/git)
CHROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SUBID_COUNT=65536
# shellcheck disable=SC2034  # set by write_file (lib.sh)
WROTE=0

validate_knobs() {
    local u
    for u in "$SLURM_USER" "$CONDOR_USER"; do
        [[ $u =~ ^[a-z_][a-z0-9_-]{0,30}$ ]] || die "invalid user name '$u'"
    done
    [[ $CONDOR_STATE == /* && $CONDOR_STATE != / ]] || die "HPCBRIDGE_CONDOR_STATE must be an absolute path"
}

# in_root ROOTFS CMD...: run CMD as root in ROOTFS with /proc mounted in a throw-away mount
# namespace (as condor-up.sh does).
in_root() {
    local root=$1
    shift
    # shellcheck disable=SC2016  # expanded by sh -c
    unshare --mount --propagation private -- sh -c \
        'mount -t proc proc "$0/proc" && exec chroot "$0" /usr/bin/env -i PATH='"$CHROOT_PATH"' HOME=/root LANG=C.UTF-8 "$@"' \
        "$root" "$@" 9>&-
}

# missing_programs ROOT: print those of PROGRAMS that ROOT (/ or a rootfs) lacks.
missing_programs() {
    local f
    for f in "${PROGRAMS[@]}"; do
        [[ -x $1$f ]] || printf '%s\n' "$f"
    done
}

install_host() {
    no_install || apt_install "${PACKAGES[@]}"
    local missing
    missing=$(missing_programs "")
    [[ -z $missing ]] || die "missing programs: ${missing//$'\n'/ } (install: ${PACKAGES[*]})"
}

install_rootfs() {
    local root=$1 missing log=$CONDOR_STATE/log/runtimes-apt.log
    missing=$(missing_programs "$root")
    if [[ -n $missing || ! -x $root/usr/sbin/update-ca-certificates ]]; then
        no_install && die "the rootfs $root lacks: ${missing//$'\n'/ } (and HPCBRIDGE_RUNTIMES_NO_INSTALL is set)"
        log "installing ${PACKAGES[*]} in the HTCondor rootfs"
        # Its apt lists may be stale: update first (a few seconds).
        if ! in_root "$root" sh -c 'apt-get -q update &&
            DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends "$@" &&
            apt-get clean' sh "${PACKAGES[@]}" >"$log" 2>&1; then
            tail -n 20 "$log" >&2
            die "installing ${PACKAGES[*]} in the rootfs failed (log: $log)"
        fi
        missing=$(missing_programs "$root")
        [[ -z $missing ]] || die "still missing in the rootfs: ${missing//$'\n'/ }"
    fi
    # registry-up.sh may have put its CA there before ca-certificates was installed.
    if [[ -n $(find "$root/usr/local/share/ca-certificates" -name '*.crt' 2>/dev/null) ]]; then
        local out
        out=$(chroot "$root" /usr/bin/env -i PATH="$CHROOT_PATH" LANG=C.UTF-8 update-ca-certificates 2>&1) ||
            { printf '%s\n' "$out" >&2; die "update-ca-certificates failed in the rootfs"; }
    fi
}

# ensure_subids ROOT USER: USER has subordinate uids and gids in ROOT/etc/subuid and /etc/subgid;
# when it has none, the 65536 ids above the highest range given out so far are added.
ensure_subids() {
    local root=$1 user=$2 f start
    for f in "$root/etc/subuid" "$root/etc/subgid"; do
        [[ -e $f ]] || install -m 644 /dev/null "$f"
        grep -q "^$user:" "$f" && continue
        start=$(awk -F: 'BEGIN { m = 100000 } NF == 3 && $2 + $3 > m { m = $2 + $3 } END { print m }' "$f")
        printf '%s:%s:%s\n' "$user" "$start" "$SUBID_COUNT" >>"$f"
        log "added $user:$start:$SUBID_COUNT to $f"
    done
}

# containers_conf: the users' containers.conf (the same on both clusters).
containers_conf() {
    cat <<'EOF'
# Written by hpcbridge tests/clusters/runtimes-up.sh: rootless Podman on the test clusters.
[containers]
# /dev/net/tun is root's alone (slirp4netns and pasta need it): containers share the host's network.
netns = "host"

[engine]
# crun fails on this machine's hybrid cgroup v1 hierarchy; there is no systemd to ask for cgroups.
runtime = "runc"
cgroup_manager = "cgroupfs"
# No journald.
events_logger = "file"
EOF
}

# setup_user ROOT USER: the subordinate ids, containers.conf and git identity of USER in ROOT.
setup_user() {
    local root=$1 user=$2 home uid gid dir
    ensure_subids "$root" "$user"
    home=$(chroot "$root" getent passwd "$user" | cut -d: -f6)
    uid=$(chroot "$root" id -u "$user")
    gid=$(chroot "$root" id -g "$user")
    [[ -n $home && -d $root$home ]] || die "$user has no home directory in ${root:-/}"
    for dir in .config .config/containers; do
        [[ -d $root$home/$dir ]] || install -d -o "$uid" -g "$gid" -m 700 "$root$home/$dir"
    done
    containers_conf | write_file "$root$home/.config/containers/containers.conf" 644 "$uid:$gid"
    if ! chroot "$root" runuser -u "$user" -- env HOME="$home" git config --global user.email >/dev/null 2>&1; then
        chroot "$root" runuser -u "$user" -- env HOME="$home" git config --global user.email "$user@localhost"
        chroot "$root" runuser -u "$user" -- env HOME="$home" git config --global user.name "$user"
        log "gave $user a git identity for ch-image"
    fi
}

# versions ROOT: the installed versions of the runtimes in ROOT, for the log.
versions() {
    # shellcheck disable=SC2016  # dpkg-query's format
    chroot "$1" dpkg-query -W -f '${Package} ${Version}, ' podman runc charliecloud 2>/dev/null | sed 's/, $//'
}

main() {
    local t0=$EPOCHREALTIME root
    parse_options up "" "$@"
    [[ $EUID -eq 0 ]] || die "run as root"
    validate_knobs
    install_host
    if id -u "$SLURM_USER" >/dev/null 2>&1; then
        setup_user / "$SLURM_USER"
        log "$(versions /) ready for $SLURM_USER"
    else
        log "no user $SLURM_USER on this machine (slurm-up.sh not run?): skipping the SLURM cluster"
    fi
    if [[ -e $CONDOR_STATE/rootfs/.hpcbridge-rootfs ]]; then
        root=$(cd "$CONDOR_STATE/rootfs" && pwd -P)
        # The same lock as condor-up.sh/condor-down.sh: not while they change the rootfs.
        exec 8>"$CONDOR_STATE/lock"
        flock -w 900 8 || die "timed out waiting for $CONDOR_STATE/lock"
        install_rootfs "$root"
        if chroot "$root" id -u "$CONDOR_USER" >/dev/null 2>&1; then
            setup_user "$root" "$CONDOR_USER"
            log "$(versions "$root") ready for $CONDOR_USER in $root"
        else
            log "no user $CONDOR_USER in $root (condor-up.sh not run?): skipping the HTCondor pool"
        fi
        exec 8>&-
    else
        log "no HTCondor rootfs in $CONDOR_STATE (condor-up.sh not run?): skipping the HTCondor pool"
    fi
    log "container runtimes ready in $(seconds_since "$t0") s"
}

main "$@"
