#!/usr/bin/env bash
# The whole test suite (`make test`): lint and types, unit and static tests, then the tests
# against the real SLURM cluster and HTCondor pool, the SSH bastion in front of them, the S3
# object store (SeaweedFS) the data movers copy to and from and the container registries the
# clusters pull images from (with Podman and Charliecloud set up for the clusters' users), which
# this script brings up and, when it started them, stops again by PID. Clusters left up by an
# earlier run are reused as they are.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
status=0
step() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*"; status=1; }

step "ruff"
"$bin/ruff" check hooks tests bench || fail "ruff"
step "import contracts"
"$bin/lint-imports" || fail "import contracts"
step "mypy"
"$bin/mypy" || fail "mypy"
# --- the static tests' programs: promtool (Debian's prometheus) and kustomize, installed by
# tests/tools.sh when missing and running as root (apt-get update only when needed).
step "programs for the static tests"
bash tests/tools.sh || fail "installing the static tests' programs (tests/tools.sh)"
# ---
step "unit and static tests"
"$bin/pytest" -q -p no:cacheprovider tests/unit tests/static || fail "unit and static tests"
"$bin/pytest" -q -p no:cacheprovider --doctest-modules hooks/core hooks/schedulers || fail "doctests"
step "fuzzing the hook server"
"$bin/pytest" -q -p no:cacheprovider tests/fuzz || fail "fuzzing"

if [ "$(id -u)" -ne 0 ]; then
  why="the real-cluster tests did not run: they need root (they install Debian packages, add the users hpcuser and submitter, and write /etc/slurm and /etc/munge), so run make test as root on a disposable machine"
  if [ "${CI:-}" = true ]; then
    fail "$why"
  else
    printf '\nNOTE: %s.\n' "$why"
  fi
  exit "$status"
fi

work=$(mktemp -d)
stop_clusters() {
  step "stopping what this run started"
  bash tests/clusters/bastion-down.sh --started "$work/started-bastion" || true
  bash tests/clusters/slurm-down.sh --started "$work/started-slurm" || true
  bash tests/clusters/condor-down.sh --started "$work/started-condor" || true
  bash tests/clusters/s3-down.sh --started "$work/started-s3" || true
  bash tests/clusters/registry-down.sh --started "$work/started-registry" || true
  rm -rf "$work"
}
trap stop_clusters EXIT

step "bringing up the SLURM cluster, the HTCondor pool and the S3 object store"
CI=true setsid bash tests/clusters/slurm-up.sh --started "$work/started-slurm" \
  </dev/null >"$work/slurm-up.log" 2>&1 &
slurm=$!
CI=true setsid bash tests/clusters/condor-up.sh --started "$work/started-condor" \
  </dev/null >"$work/condor-up.log" 2>&1 &
condor=$!
CI=true setsid bash tests/clusters/s3-up.sh --started "$work/started-s3" \
  </dev/null >"$work/s3-up.log" 2>&1 &
s3=$!
wait "$slurm" || { cat "$work/slurm-up.log"; fail "SLURM bring-up"; }
wait "$condor" || { cat "$work/condor-up.log"; fail "HTCondor bring-up"; }
wait "$s3" || { cat "$work/s3-up.log"; fail "S3 bring-up"; }
tail -n 3 "$work/slurm-up.log" "$work/condor-up.log" "$work/s3-up.log"
# The SSH bastion in front of the clusters' login nodes (it fronts whichever came up).
step "bringing up the SSH bastion"
CI=true setsid -w bash tests/clusters/bastion-up.sh --started "$work/started-bastion" \
  </dev/null >"$work/bastion-up.log" 2>&1 || { cat "$work/bastion-up.log"; fail "bastion bring-up"; }
tail -n 1 "$work/bastion-up.log"
# The container registries (their CA trusted on this machine and in the pool's rootfs) and the
# container runtimes for the clusters' users; both need the clusters' users and rootfs.
step "bringing up the container registries and runtimes"
CI=true setsid -w bash tests/clusters/registry-up.sh --started "$work/started-registry" \
  </dev/null >"$work/registry-up.log" 2>&1 || { cat "$work/registry-up.log"; fail "registry bring-up"; }
tail -n 1 "$work/registry-up.log"
CI=true setsid -w bash tests/clusters/runtimes-up.sh \
  </dev/null >"$work/runtimes-up.log" 2>&1 || { cat "$work/runtimes-up.log"; fail "container runtimes set-up"; }
tail -n 1 "$work/runtimes-up.log"

# The clusters were just brought up: from here on a cluster test that cannot run is a failure.
step "integration tests (in parallel)"
CI=true "$bin/pytest" -q -p no:cacheprovider -n 4 --timeout 900 -m "not outage" tests/integration \
  || fail "integration tests"
step "outage tests (one at a time: they stop daemons)"
CI=true "$bin/pytest" -q -p no:cacheprovider --timeout 900 -m outage tests/integration \
  || fail "outage tests"
exit "$status"
