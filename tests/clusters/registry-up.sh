#!/usr/bin/env bash
# Idempotent bring-up of two real container registries on loopback for the container tests
# (Debian's docker-registry, i.e. distribution 2.8), both HTTPS with a certificate of a test CA
# made once and kept in the state dir:
#   - a public one (anyone may pull and push), HPCBRIDGE_REGISTRY_PORT;
#   - a private one: every request needs HTTP basic auth (htpasswd, bcrypt) as the user
#     hpcbridge with a random password made once and kept, HPCBRIDGE_REGISTRY_PRIVATE_PORT.
# The CA goes into this machine's system trust store (/usr/local/share/ca-certificates) and, when
# the HTCondor pool's rootfs exists, into that one's too, so that podman, skopeo, buildah and
# ch-image on both clusters trust the registries without flags.
# It then builds small images from a busybox-static root filesystem (buildah, vfs storage in the
# state dir) and pushes them, once: a later run copies an image again only when its tag went
# missing or was pushed over (the kept OCI archive is copied as it is, so the digest stays):
#   REGISTRY/lab/hello:1          Entrypoint ["/bin/echo","hello from the image"], Env GREETING=hi
#   REGISTRY/lab/tools:1          no Entrypoint, Cmd ["/bin/sh","-c","echo tools default cmd"],
#                                 Env GREETING=hi, WorkingDir /
#   PRIVATE_REGISTRY/lab/secret:1 Entrypoint ["/bin/echo","hello from the private image"]
# tests/clusters/registry-push.sh pushes further (unique) images, e.g. to move a tag.
#
# Usage (as root): registry-up.sh [--started FILE]
#   --started FILE  append the pid file of each registry this run starts to FILE, so the caller
#                   can later stop exactly those (registry-down.sh --started FILE).
# Knobs (environment): HPCBRIDGE_REGISTRY_STATE (/var/tmp/hpcbridge-registry),
# HPCBRIDGE_REGISTRY_PORT (5443), HPCBRIDGE_REGISTRY_PRIVATE_PORT (5444),
# HPCBRIDGE_REGISTRY_NO_INSTALL (set: never run apt-get), HPCBRIDGE_CONDOR_STATE
# (/var/tmp/hpcbridge-condor; its rootfs/ gets the CA too).
# On success $STATE/env (mode 600, KEY=value lines) holds REGISTRY and PRIVATE_REGISTRY
# (127.0.0.1:PORT), REGISTRY_USER, REGISTRY_PASSWORD, REGISTRY_AUTHFILE (a containers-auth.json
# with those credentials), REGISTRY_CA (the CA's PEM), IMAGE_HELLO, IMAGE_TOOLS, IMAGE_SECRET
# (references with their tag), IMAGE_*_DIGEST (the manifest digest, sha256:...),
# IMAGE_*_ARCHIVE (the same image as an OCI archive on this machine), the pid files and the logs.
# A registry that is running is reused as it is.
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_REGISTRY_STATE:-/var/tmp/hpcbridge-registry}
PORT=${HPCBRIDGE_REGISTRY_PORT:-5443}
PRIVATE_PORT=${HPCBRIDGE_REGISTRY_PRIVATE_PORT:-5444}
NO_INSTALL=${HPCBRIDGE_REGISTRY_NO_INSTALL:-}
CONDOR_STATE=${HPCBRIDGE_CONDOR_STATE:-/var/tmp/hpcbridge-condor}
HOST=127.0.0.1
REGISTRY_BIN=/usr/bin/docker-registry
USER_NAME=hpcbridge
CA_NAME=hpcbridge-test-registry-ca.crt
PACKAGES=(docker-registry apache2-utils buildah skopeo busybox-static openssl ca-certificates curl
    iproute2)
STARTED_FILE=""
WROTE=0

validate_knobs() {
    local p
    for p in "$PORT" "$PRIVATE_PORT"; do
        if ! [[ $p =~ ^[1-9][0-9]*$ ]] || ((p >= 65536)); then
            die "the registry ports must be integers below 65536, got '$p'"
        fi
    done
    [[ $PORT != "$PRIVATE_PORT" ]] || die "HPCBRIDGE_REGISTRY_PORT and HPCBRIDGE_REGISTRY_PRIVATE_PORT are both $PORT"
    [[ $STATE =~ ^(/[A-Za-z0-9._-]+)+$ ]] ||
        die "HPCBRIDGE_REGISTRY_STATE must be an absolute path of letters, digits and ._-, got '$STATE'"
}

install_packages() {
    local f missing=()
    no_install || apt_install "${PACKAGES[@]}"
    for f in "$REGISTRY_BIN" /usr/bin/htpasswd /usr/bin/buildah /usr/bin/skopeo /bin/busybox \
        /usr/bin/openssl /usr/sbin/update-ca-certificates /usr/bin/curl /usr/bin/ss; do
        [[ -x $f ]] || missing+=("$f")
    done
    ((${#missing[@]} == 0)) || die "missing programs: ${missing[*]} (install: ${PACKAGES[*]})"
    # busybox (the dynamic one) installs /bin/busybox too; an image needs the static one.
    file_is_static /bin/busybox || die "/bin/busybox is not statically linked: install busybox-static"
}

file_is_static() {
    ! ldd "$1" >/dev/null 2>&1
}

prepare_dirs() {
    install -d -m 755 "$STATE" "$STATE/log" "$STATE/tls" "$STATE/images" "$STATE/public" "$STATE/private"
    install -d -m 700 "$STATE/pids" "$STATE/secrets" "$STATE/public/data" "$STATE/private/data" "$STATE/buildah"
    touch "$STATE/.hpcbridge-registry-state"
}

# secret NAME: print $STATE/secrets/NAME, creating it with a random value the first time.
secret() {
    local f=$STATE/secrets/$1
    if [[ ! -s $f ]]; then
        (umask 077 && od -An -N18 -tx1 /dev/urandom | tr -d ' \n' >"$f.tmp" && mv -f "$f.tmp" "$f")
    fi
    cat "$f"
}

# The test CA (made once: a new one would have to be trusted again everywhere) and the server's
# certificate for 127.0.0.1 and localhost, signed again when missing, not from this CA or less
# than 30 days from its end.
make_tls() {
    local tls=$STATE/tls
    if [[ ! -s $tls/ca.pem || ! -s $tls/ca.key ]]; then
        log "making the test registry CA"
        rm -f "$tls/ca.pem" "$tls/ca.key" "$tls/server.pem"
        (umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
            -subj "/O=hpcbridge tests/CN=hpcbridge test registry CA" \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
            -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null) || die "openssl could not make the CA"
        chmod 644 "$tls/ca.pem"
    fi
    if [[ -s $tls/server.pem && -s $tls/server.key ]] &&
        openssl verify -CAfile "$tls/ca.pem" "$tls/server.pem" >/dev/null 2>&1 &&
        openssl x509 -in "$tls/server.pem" -noout -checkend $((30 * 86400)) >/dev/null &&
        openssl x509 -in "$tls/server.pem" -noout -ext subjectAltName 2>/dev/null | grep -q 'IP Address:127.0.0.1'; then
        return 0
    fi
    log "signing the registries' server certificate"
    (umask 077 && openssl req -newkey rsa:2048 -nodes -sha256 -subj "/O=hpcbridge tests/CN=127.0.0.1" \
        -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null) || die "openssl could not make the server key"
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=critical,CA:FALSE' \
        'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' >"$tls/server.ext"
    openssl x509 -req -sha256 -days 825 -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
        -CAcreateserial -extfile "$tls/server.ext" -out "$tls/server.pem" 2>/dev/null ||
        die "openssl could not sign the server certificate"
    rm -f "$tls/server.csr"
    # A running registry read the old certificate when it started.
    RESTART=1
}

# trust_ca ROOT: put the CA into the trust store of the system at ROOT (/ or the pool's rootfs)
# and rebuild its bundle when the file changed or the bundle lacks it.
trust_ca() {
    local root=$1 dir=$1/usr/local/share/ca-certificates bundle=$1/etc/ssl/certs/ca-certificates.crt out
    install -d -m 755 "$dir"
    write_file "$dir/$CA_NAME" 644 root:root <"$STATE/tls/ca.pem"
    if ((WROTE == 0)) && [[ -e $root/etc/ssl/certs/${CA_NAME%.crt}.pem ]] && [[ -s $bundle ]]; then
        return 0
    fi
    if [[ $root == / ]]; then
        out=$(update-ca-certificates 2>&1) || { printf '%s\n' "$out" >&2; die "update-ca-certificates failed"; }
    elif [[ -x $root/usr/sbin/update-ca-certificates ]]; then
        out=$(chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            update-ca-certificates 2>&1) || { printf '%s\n' "$out" >&2; die "update-ca-certificates failed in $root"; }
    else
        # tests/clusters/runtimes-up.sh installs ca-certificates there and runs it.
        log "$root has no update-ca-certificates yet: the CA is in place for it"
        return 0
    fi
    log "the test registry CA is trusted in ${root%/}/etc/ssl/certs"
}

# The htpasswd file of the private registry: written again only when it no longer matches the
# password (htpasswd -v).
make_htpasswd() {
    local f=$STATE/private/htpasswd
    PASSWORD=$(secret password)
    if [[ -s $f ]] && htpasswd -v -b "$f" "$USER_NAME" "$PASSWORD" >/dev/null 2>&1; then
        return 0
    fi
    (umask 077 && htpasswd -c -B -b "$f.new" "$USER_NAME" "$PASSWORD" 2>/dev/null) || die "htpasswd failed"
    mv -f "$f.new" "$f"
    # The registry reads the file once, at its start: a running one must start again.
    RESTART_NAMES+=(private)
}

write_auth_file() {
    printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$HOST:$PRIVATE_PORT" \
        "$(printf '%s:%s' "$USER_NAME" "$PASSWORD" | base64 -w0)" |
        write_file "$STATE/secrets/auth.json" 600 root:root
}

# write_config NAME PORT AUTH: the registry's configuration; AUTH=1 adds htpasswd auth.
write_config() {
    local name=$1 port=$2 auth=$3
    {
        cat <<EOF
# Written by hpcbridge tests/clusters/registry-up.sh on every run.
version: 0.1
log:
  level: info
  fields:
    service: hpcbridge-registry-$name
storage:
  filesystem:
    rootdirectory: $STATE/$name/data
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: $HOST:$port
  secret: $(secret "http-secret-$name")
  headers:
    X-Content-Type-Options: [nosniff]
  tls:
    certificate: $STATE/tls/server.pem
    key: $STATE/tls/server.key
health:
  storagedriver:
    enabled: false
EOF
        if ((auth)); then
            cat <<EOF
auth:
  htpasswd:
    realm: hpcbridge-private
    path: $STATE/private/htpasswd
EOF
        fi
    } | write_file "$STATE/$name/config.yml" 600 root:root
    ((WROTE == 0)) || RESTART_NAMES+=("$name")
}

# running NAME: the registry of this state dir called NAME runs (its pid file names a live
# docker-registry serving this configuration).
running() {
    local pidfile=$STATE/pids/registry-$1.pid pid
    pid_alive "$pidfile" "$REGISTRY_BIN" || return 1
    pid=$(pid_of "$pidfile")
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$STATE/$1/config.yml"
}

# answers NAME PORT: GET /v2/ over verified TLS answers 200 (public) or 401 without and 200 with
# the credentials (private).
answers() {
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$STATE/tls/ca.pem" \
        "https://$HOST:$2/v2/") || return 1
    if [[ $1 == public ]]; then
        [[ $code == 200 ]]
    else
        [[ $code == 401 ]] || return 1
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$STATE/tls/ca.pem" \
            -u "$USER_NAME:$PASSWORD" "https://$HOST:$2/v2/") || return 1
        [[ $code == 200 ]]
    fi
}

ready() { # NAME PORT
    if ! running "$1"; then
        lives "$(pid_of "$STATE/pids/registry-$1.pid")" && return 1
        tail -n 20 "$STATE/log/registry-$1.log" >&2
        die "the $1 registry exited (log: $STATE/log/registry-$1.log)"
    fi
    answers "$1" "$2"
}

start_registry() { # NAME PORT
    local name=$1 port=$2 pidfile=$STATE/pids/registry-$1.pid pid
    if port_in_use "$port"; then
        ss -Hltnp "sport = :$port" >&2 || true
        die "port $port (the $name registry) is taken by a process this script did not start;" \
            "choose another with HPCBRIDGE_REGISTRY_PORT / HPCBRIDGE_REGISTRY_PRIVATE_PORT"
    fi
    reserve_ports "$port"
    rm -f "$pidfile"
    log "starting the $name registry on $HOST:$port"
    env --default-signal=INT,QUIT setsid "$REGISTRY_BIN" serve "$STATE/$name/config.yml" \
        </dev/null >>"$STATE/log/registry-$name.log" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$pidfile"
    record_started "$STARTED_FILE" "$pidfile"
    wait_until 30 ready "$name" "$port" || {
        tail -n 20 "$STATE/log/registry-$name.log" >&2
        die "the $name registry does not answer on https://$HOST:$port/v2/"
    }
}

ensure_registry() { # NAME PORT
    local name=$1 port=$2 n restart=$RESTART
    for n in "${RESTART_NAMES[@]}"; do [[ $n != "$name" ]] || restart=1; done
    if running "$name"; then
        if ((restart == 0)) && answers "$name" "$port"; then
            log "the $name registry is already running"
            return 0
        fi
        log "restarting the $name registry (its configuration, certificate or password changed)"
        stop_pid "$STATE/pids/registry-$name.pid" "$REGISTRY_BIN" || die "could not stop the $name registry"
        # Started again by this run: its pid file belongs to this run's --started list now.
    fi
    start_registry "$name" "$port"
}

# skopeo_auth REFERENCE: print the credentials option skopeo needs for REFERENCE (none on the
# public registry).
skopeo_auth() { # OPTION REFERENCE
    [[ $2 != "$HOST:$PRIVATE_PORT/"* ]] || printf '%s\n' "$1" "$USER_NAME:$PASSWORD"
}

# remote_digest REFERENCE: print the manifest digest the registry serves for REFERENCE; fail
# when there is no such tag.
remote_digest() {
    local -a auth
    mapfile -t auth < <(skopeo_auth --creds "$1")
    skopeo inspect --retry-times 2 --format '{{.Digest}}' "${auth[@]}" "docker://$1" 2>/dev/null
}

# build_image ROOTFS_TAR DESTINATION BUILDAH-CONFIG-ARG...: an image of ROOTFS_TAR with that
# configuration, committed straight to DESTINATION (a containers-transports reference). buildah's
# storage (vfs: no overlay or fuse needed) is the state dir's.
build_image() {
    local tar=$1 dest=$2 c
    shift 2
    local -a bh=(buildah --root "$STATE/buildah/storage" --runroot "$STATE/buildah/run" --storage-driver vfs)
    c=$("${bh[@]}" from --quiet scratch) || die "buildah from scratch failed"
    if ! { "${bh[@]}" add --quiet "$c" "$tar" / >/dev/null &&
        "${bh[@]}" config "$@" "$c" &&
        "${bh[@]}" commit --quiet --rm "$c" "$dest" >/dev/null; }; then
        "${bh[@]}" rm "$c" >/dev/null 2>&1 || true
        die "buildah could not build $dest"
    fi
}

# make_rootfs_tar: $STATE/images/rootfs.tar, the busybox-static root filesystem every image is
# made of (made once).
make_rootfs_tar() {
    local tar=$STATE/images/rootfs.tar dir cmd
    [[ -s $tar ]] && return 0
    log "making the busybox root filesystem"
    dir=$(mktemp -d "$STATE/images/rootfs.XXXXXX")
    install -d -m 755 "$dir/bin" "$dir/etc" "$dir/proc" "$dir/sys" "$dir/dev" "$dir/home" "$dir/root" \
        "$dir/usr/bin" "$dir/usr/sbin" "$dir/sbin" "$dir/var"
    install -d -m 1777 "$dir/tmp"
    install -m 755 /bin/busybox "$dir/bin/busybox"
    for cmd in $(/bin/busybox --list); do
        [[ $cmd == busybox || -e $dir/bin/$cmd ]] || ln -s busybox "$dir/bin/$cmd"
    done
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$dir/etc/passwd"
    printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$dir/etc/group"
    : >"$dir/etc/hosts"
    : >"$dir/etc/resolv.conf"
    tar -C "$dir" --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -cf "$tar.new" . ||
        die "could not pack the busybox root filesystem"
    rm -rf -- "$dir"
    mv -f "$tar.new" "$tar"
}

# ensure_image KEY REFERENCE BUILDAH-CONFIG-ARG...: the image REFERENCE exists in its registry as
# kept in $STATE/images/KEY.tar (an OCI archive built once from the busybox root filesystem with
# the given `buildah config` arguments; built again when they change). Sets DIGEST.
ensure_image() {
    local key=$1 ref=$2 archive=$STATE/images/$1.tar spec have
    shift 2
    spec=$(printf '%s\n' "$ref" "$@")
    if [[ ! -s $archive || ! -s $STATE/images/$key.spec || $(<"$STATE/images/$key.spec") != "$spec" ]]; then
        log "building the image $ref"
        rm -f "$archive" "$STATE/images/$key.digest"
        rm -f "$archive.new" "$archive.raw"
        build_image "$STATE/images/rootfs.tar" "oci-archive:$archive.raw" "$@"
        # buildah leaves the layer uncompressed; registries mostly serve gzip layers.
        skopeo copy -q --dest-compress --dest-compress-format gzip "oci-archive:$archive.raw" \
            "oci-archive:$archive.new" >&2 || die "skopeo could not compress $archive.raw"
        rm -f "$archive.raw"
        mv -f "$archive.new" "$archive"
        chmod 644 "$archive"
        printf '%s\n' "$spec" >"$STATE/images/$key.spec"
    fi
    # The manifest digest as the registry will serve it: the archive is copied as it is.
    if [[ ! -s $STATE/images/$key.digest ]]; then
        skopeo inspect --format '{{.Digest}}' "oci-archive:$archive" >"$STATE/images/$key.digest" ||
            die "skopeo inspect oci-archive:$archive failed"
    fi
    DIGEST=$(<"$STATE/images/$key.digest")
    have=$(remote_digest "$ref" || true)
    if [[ $have == "$DIGEST" ]]; then
        return 0
    fi
    log "pushing $ref (${have:-missing} there, want $DIGEST)"
    local -a auth
    mapfile -t auth < <(skopeo_auth --dest-creds "$ref")
    skopeo copy -q --preserve-digests "${auth[@]}" "oci-archive:$archive" "docker://$ref" >&2 ||
        die "skopeo copy to docker://$ref failed"
    have=$(remote_digest "$ref") || die "$ref is not there after the push"
    [[ $have == "$DIGEST" ]] || die "$ref has digest $have after the push, expected $DIGEST"
}

write_env() {
    {
        printf '%s=%q\n' \
            REGISTRY_STATE "$STATE" \
            REGISTRY "$HOST:$PORT" \
            PRIVATE_REGISTRY "$HOST:$PRIVATE_PORT" \
            REGISTRY_USER "$USER_NAME" \
            REGISTRY_PASSWORD "$PASSWORD" \
            REGISTRY_AUTHFILE "$STATE/secrets/auth.json" \
            REGISTRY_CA "$STATE/tls/ca.pem" \
            IMAGE_HELLO "$HOST:$PORT/lab/hello:1" \
            IMAGE_HELLO_DIGEST "${DIGESTS[hello]}" \
            IMAGE_HELLO_ARCHIVE "$STATE/images/hello.tar" \
            IMAGE_TOOLS "$HOST:$PORT/lab/tools:1" \
            IMAGE_TOOLS_DIGEST "${DIGESTS[tools]}" \
            IMAGE_TOOLS_ARCHIVE "$STATE/images/tools.tar" \
            IMAGE_SECRET "$HOST:$PRIVATE_PORT/lab/secret:1" \
            IMAGE_SECRET_DIGEST "${DIGESTS[secret]}" \
            IMAGE_SECRET_ARCHIVE "$STATE/images/secret.tar" \
            REGISTRY_PIDFILE "$STATE/pids/registry-public.pid" \
            PRIVATE_REGISTRY_PIDFILE "$STATE/pids/registry-private.pid" \
            REGISTRY_LOG "$STATE/log/registry-public.log" \
            PRIVATE_REGISTRY_LOG "$STATE/log/registry-private.log"
    } | write_file "$STATE/env" 600 root:root
}

main() {
    local t0=$EPOCHREALTIME
    RESTART=0
    RESTART_NAMES=()
    declare -gA DIGESTS=()
    begin_up registry "$@"
    install_packages
    prepare_dirs
    make_tls
    make_htpasswd
    write_auth_file
    trust_ca /
    if [[ -d $CONDOR_STATE/rootfs/etc ]]; then
        trust_ca "$(cd "$CONDOR_STATE/rootfs" && pwd -P)"
    fi
    write_config public "$PORT" 0
    write_config private "$PRIVATE_PORT" 1
    ensure_registry public "$PORT"
    ensure_registry private "$PRIVATE_PORT"

    make_rootfs_tar
    ensure_image hello "$HOST:$PORT/lab/hello:1" \
        --entrypoint '["/bin/echo","hello from the image"]' --env GREETING=hi
    DIGESTS[hello]=$DIGEST
    ensure_image tools "$HOST:$PORT/lab/tools:1" \
        --cmd '["/bin/sh","-c","echo tools default cmd"]' --env GREETING=hi --workingdir /
    DIGESTS[tools]=$DIGEST
    ensure_image secret "$HOST:$PRIVATE_PORT/lab/secret:1" \
        --entrypoint '["/bin/echo","hello from the private image"]'
    DIGESTS[secret]=$DIGEST
    write_env
    log "registries up at https://$HOST:$PORT and https://$HOST:$PRIVATE_PORT in $(seconds_since "$t0") s ($STATE/env)"
}

main "$@"
