#!/usr/bin/env bash
# Create the project's virtualenv and install a requirements file into it.
# On a fresh Debian machine the venv module may be missing: as root, install it with apt.
set -euo pipefail
python=$1 venv=$2 requirements=$3
if [ ! -x "$venv/bin/python" ]; then
  if ! "$python" -m venv "$venv" 2>/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "$python cannot create a virtualenv; install python3-venv (as root: apt-get install python3-venv)" >&2
      exit 1
    fi
    rm -rf "$venv"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq -o DPkg::Lock::Timeout=600 python3-venv python3-pip >/dev/null
    "$python" -m venv "$venv"
  fi
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
