#!/usr/bin/env bash
# Push a fresh image to one of the test registries of registry-up.sh and print its manifest
# digest (sha256:..., as `skopeo inspect` reports it) on stdout, e.g. to move a tag the tests
# already pulled. The image is the busybox root filesystem registry-up.sh made, with a label
# org.hpcbridge.push=UNIQUE that makes every call's digest a new one. The push to the private
# registry uses the credentials in $STATE/env.
#
# Usage (as root, after registry-up.sh): registry-push.sh REFERENCE [--entrypoint JSON]
#     [--cmd JSON] [--env K=V]... [--label K=V]...
#   REFERENCE         HOST:PORT/NAME:TAG, e.g. 127.0.0.1:5443/lab/hello:1
#   --entrypoint JSON the image's Entrypoint, e.g. '["/bin/echo","moved"]' (default: none)
#   --cmd JSON        its Cmd (default: ["/bin/echo","pushed by registry-push.sh","UNIQUE"],
#                     or none when --entrypoint is given)
#   --env K=V         an Env entry (repeatable)
#   --label K=V       a further label (repeatable)
# Knobs: HPCBRIDGE_REGISTRY_STATE (/var/tmp/hpcbridge-registry).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

STATE=${HPCBRIDGE_REGISTRY_STATE:-/var/tmp/hpcbridge-registry}
TMP=""

# env_value KEY: the value of KEY in $STATE/env (written with printf %q: plain words here).
env_value() {
    sed -n "s/^$1=//p" "$STATE/env" | tail -n 1
}

main() {
    local ref="" entrypoint="" cmd="" have_cmd=0 unique digest
    local -a config=()
    while (($#)); do
        case $1 in
            --entrypoint) (($# >= 2)) || die "--entrypoint needs JSON"; entrypoint=$2; shift 2 ;;
            --cmd) (($# >= 2)) || die "--cmd needs JSON"; cmd=$2; have_cmd=1; shift 2 ;;
            --env) (($# >= 2)) || die "--env needs K=V"; config+=(--env "$2"); shift 2 ;;
            --label) (($# >= 2)) || die "--label needs K=V"; config+=(--label "$2"); shift 2 ;;
            -h | --help) usage; exit 0 ;;
            -*) die "unknown option: $1 (see --help)" ;;
            *) [[ -z $ref ]] || die "one REFERENCE only (see --help)"; ref=$1; shift ;;
        esac
    done
    [[ -n $ref ]] || die "no REFERENCE given (see --help)"
    [[ $ref =~ ^[A-Za-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+:[A-Za-z0-9_.-]+$ ]] ||
        die "REFERENCE must be HOST:PORT/NAME:TAG, got '$ref'"
    [[ $EUID -eq 0 ]] || die "run as root"
    [[ -r $STATE/env && -s $STATE/images/rootfs.tar ]] || die "no $STATE/env: run registry-up.sh first"

    unique=$(date +%s.%N)-$$-$RANDOM
    config+=(--label "org.hpcbridge.push=$unique")
    if [[ -n $entrypoint ]]; then
        config+=(--entrypoint "$entrypoint")
    fi
    if ((have_cmd)); then
        config+=(--cmd "$cmd")
    elif [[ -z $entrypoint ]]; then
        config+=(--cmd "[\"/bin/echo\",\"pushed by registry-push.sh\",\"$unique\"]")
    fi

    local -a auth=() bh=(buildah --root "$STATE/buildah/storage" --runroot "$STATE/buildah/run" --storage-driver vfs)
    if [[ ${ref%%/*} == "$(env_value PRIVATE_REGISTRY)" ]]; then
        auth=(--dest-creds "$(env_value REGISTRY_USER):$(env_value REGISTRY_PASSWORD)")
    fi
    TMP=$(mktemp -d "$STATE/images/push.XXXXXX")
    trap 'rm -rf -- "$TMP"' EXIT
    local c
    c=$("${bh[@]}" from --quiet scratch) || die "buildah from scratch failed"
    if ! { "${bh[@]}" add --quiet "$c" "$STATE/images/rootfs.tar" / >/dev/null &&
        "${bh[@]}" config "${config[@]}" "$c" &&
        "${bh[@]}" commit --quiet --rm "$c" "oci-archive:$TMP/image.tar" >/dev/null; }; then
        "${bh[@]}" rm "$c" >/dev/null 2>&1 || true
        die "buildah could not build the image"
    fi
    skopeo copy -q --dest-compress --dest-compress-format gzip "${auth[@]}" \
        "oci-archive:$TMP/image.tar" "docker://$ref" >&2 || die "skopeo copy to docker://$ref failed"
    auth=("${auth[@]/#--dest-creds/--creds}")
    digest=$(skopeo inspect --format '{{.Digest}}' "${auth[@]}" "docker://$ref") ||
        die "skopeo inspect docker://$ref failed after the push"
    log "pushed $ref ($digest, org.hpcbridge.push=$unique)"
    printf '%s\n' "$digest"
}

main "$@"
