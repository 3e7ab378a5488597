#!/usr/bin/env bash
# The programs the static tests run that neither the virtualenv nor a fresh Debian machine has:
# promtool (Debian's prometheus package) checks and unit-tests the alert rules, and kustomize
# (Debian's kustomize package) checks that `kustomize edit set image` in deploy/ still reaches
# the log Pods (the README's install needs kubectl alone), and nginx (Debian's nginx-light
# package) is the hooks' TLS front in the integration tests and the benchmark. As root, installs
# the missing ones; otherwise only says what is missing (the tests then skip, or fail with
# CI=true). kubectl, which renders the installs, comes with the machine; without it the tests
# render with this kustomize. Debian packages go through tests/clusters/lib.sh's apt_install:
# non-interactive, waiting for the dpkg lock, apt-get update only when needed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR source=clusters/lib.sh
. tests/clusters/lib.sh
VENV_BIN=.venv/bin

have() { command -v "$1" >/dev/null || [ -x "$VENV_BIN/$1" ]; }

# fetch_deb SUITE PACKAGE DIR: download PACKAGE's .deb from SUITE of this machine's Debian
# mirror into DIR, with apt state of its own in DIR: the machine's sources, lists, cache and
# installed packages are left as they are.
fetch_deb() {
  local suite=$1 package=$2 dir=$3 mirror
  mirror=$(debian_mirror) || die "no Debian mirror found in the apt sources"
  mkdir -p "$dir/parts" "$dir/lists/partial" "$dir/cache/archives/partial"
  printf 'deb %s %s main\n' "$mirror" "$suite" >"$dir/sources.list"
  local -a own=(-q -o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/parts"
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o APT::Sandbox::User=root)
  apt-get "${own[@]}" update >&2
  (cd "$dir" && apt-get "${own[@]}" download "$package" >&2)
}

# kustomize is packaged from Debian 13 (trixie) on. Where the machine's release has none, its
# trixie .deb is fetched and only the program (one Go binary, needing libc 2.34) is unpacked into
# the virtualenv.
install_kustomize() {
  if (apt_install kustomize) 2>/dev/null; then
    return 0
  fi
  local dir
  dir=$(mktemp -d)
  log "fetching kustomize from Debian trixie into $VENV_BIN"
  fetch_deb trixie kustomize "$dir"
  dpkg-deb -x "$dir"/kustomize_*.deb "$dir/root"
  install -m 0755 "$dir/root/usr/bin/kustomize" "$VENV_BIN/kustomize"
  rm -rf "$dir"
}

if [ "$(id -u)" -ne 0 ]; then
  for tool in promtool kustomize nginx; do
    have "$tool" || log "$tool is missing (as root, tests/tools.sh installs it): its static tests skip"
  done
  exit 0
fi
have promtool || apt_install prometheus
have kustomize || install_kustomize
have nginx || apt_install nginx-light
have promtool || die "promtool is still missing after installing prometheus"
have kustomize || die "kustomize is still missing"
have nginx || die "nginx is still missing after installing nginx-light"
