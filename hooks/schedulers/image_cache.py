"""The site's image cache on the login node: find an image there, or pull it in the background,
once however many attempts ask; one remote command per sync, shared by every scheduler.

The cache is ``<imageCache>/<login user>/<runtime>/``, mode 0700: the login user's own, so that
no other user of a shared cache directory can read a private image or plant one under a digest
a BatchJob trusts. An image is ``sha256-<hex><suffix>`` (the runtime's form of it), with its
config beside it (``.json``, the entrypoint a runtime may not apply by itself) and, under
``tags/``, the digest each reference named when it was last pulled (what ``imagePullPolicy:
Never`` and an unreachable registry fall back on).

A pull runs detached from the command (``setsid``), as the user, and answers through the
attempt's pull directory: ``started/`` (made atomically: one pull process per attempt, whatever
syncs race), ``pull.log`` and ``pull.status``. Pulls of one image serialize on ``flock`` of a
lock file in the cache, and the runtime writes into a temporary name that is renamed into place
only once complete: two BatchJobs asking for one image pull it once, and a pull that dies
leaves no half image under the final name. The registry login reaches the runtime only through
stdin and files of mode 0600 in the pull directory's ``auth/``, removed when the pull ends.
"""

from __future__ import annotations

import base64
import hashlib
import json

from hooks.core.runtimes import RUNTIMES
from hooks.core.spec.manifests import parse_config
from hooks.core.values.image import DIGEST, ImageConfig, ImagePull, Prepared, PreparedImage
from hooks.core.values.sdk import SchedulerError
from hooks.core.values.text import has_control, readable
from hooks.deadline import Deadline
from hooks.ssh.client import Remote

PULL = r"""
set -u
store=$1; name=$2; src=$3; ref=$4; dir=$5; pulling=$6
final=$store/$name
status() {
  printf '%s\n' "$1" > "$dir/pull.status.tmp" && mv -f -- "$dir/pull.status.tmp" "$dir/pull.status"
}
if ! { exec 9> "$store/.locks/$name" && flock 9; }; then
  echo "cannot lock $store/.locks/$name"; rm -rf -- "$dir/auth"; status 1; exit 1
fi
rc=0
if [ -e "$final" ]; then
  echo "hpcbridge: $src is in the cache"
else
  echo "hpcbridge: pulling $src"
  tmp=$store/.tmp-$name-$$
  rm -rf -- "$tmp"
  auth=; [ -f "$dir/auth/auth.json" ] && auth=$dir/auth
  ( eval "$pulling" ) < /dev/null; rc=$?
  if [ "$rc" -eq 0 ] && [ -e "$tmp" ]; then mv -- "$tmp" "$final" || rc=1
  elif [ "$rc" -eq 0 ]; then echo "the runtime left no image"; rc=1
  fi
  rm -rf -- "$tmp"
fi
rm -rf -- "$dir/auth"
if [ "$rc" -eq 0 ] && [ -s "$dir/config.json" ]; then
  cp -- "$dir/config.json" "$final.json.tmp" && mv -f -- "$final.json.tmp" "$final.json" || rc=1
fi
status "$rc"
"""
"""The detached pull: ``$1`` the cache of the runtime, ``$2`` the image's name there, ``$3`` and
``$4`` the pinned reference with and without transport, ``$5`` the pull directory, ``$6`` the
runtime's pull lines (``hooks.core.runtimes``), which read ``$src``, ``$ref``, ``$tmp`` and
``$auth``."""

PROGRAM = r"""
set -u
umask 077
cache=$1; runtime=$2; key=$3; digest=$4; suffix=$5; src=$6; ref=$7; dir=$8; mode=$9
pulling=${10}; program=${11}; shift 11
case $cache in /*) ;; *) cache=$HOME/$cache ;; esac
case $dir in /*) ;; *) dir=$HOME/$dir ;; esac
answer() { cat > /dev/null; printf '%s\n' "$@"; exit 0; }
user=$(id -un) || answer "failed cannot tell the login user"
store=$cache/$user/$runtime
mkdir -p -- "$store/tags" "$store/.locks" && chmod 700 -- "$cache/$user" \
  || answer "failed cannot create the image cache $store"
if [ -z "$digest" ]; then
  [ -s "$store/tags/$key" ] || answer missing
  digest=$(head -n 1 -- "$store/tags/$key")
  case $digest in sha256:*) ;; *) answer missing ;; esac
fi
name=$(printf '%s' "$digest" | tr ':' '-')$suffix
final=$store/$name
ready() {
  printf '%s\n' "$digest" > "$store/tags/$key.tmp" \
    && mv -f -- "$store/tags/$key.tmp" "$store/tags/$key"
  answer "ready $digest $final" "$(head -c 1048576 -- "$final.json" 2>/dev/null | tr -d '\n')"
}
[ -e "$final" ] && [ -e "$final.json" ] && ready
[ "$mode" = lookup ] && answer missing
mkdir -p -- "$dir" || answer "failed cannot create $dir"
if [ -e "$dir/pull.status" ]; then
  if [ "$mode" = retry ] || [ ! -d "$dir/started" ]; then
    rm -rf -- "$dir/started" "$dir/pull.status"
  elif [ "$(head -n 1 -- "$dir/pull.status")" = 0 ] && [ -e "$final" ]; then
    ready
  else
    answer "failed $(grep -v '^[[:space:]]*$' "$dir/pull.log" | tail -n 1)"
  fi
fi
if mkdir -- "$dir/started" 2>/dev/null; then
  rm -rf -- "$dir/auth" && mkdir -- "$dir/auth" || answer "failed cannot create $dir/auth"
  head -c "$1" > "$dir/config.json"
  [ "$2" -gt 0 ] && head -c "$2" > "$dir/auth/auth.json" && head -c "$3" > "$dir/auth/username" \
    && head -c "$4" > "$dir/auth/password"
  cat > /dev/null
  [ "$2" -gt 0 ] || rm -rf -- "$dir/auth"
  setsid sh -c "$program" hpcbridge-pull "$store" "$name" "$src" "$ref" "$dir" "$pulling" \
    < /dev/null > "$dir/pull.log" 2>&1 &
  printf '%s\n' "$!" > "$dir/started/pid"
  answer pulling
fi
pid=$(head -n 1 -- "$dir/started/pid" 2>/dev/null)
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && answer pulling
[ -e "$dir/pull.status" ] && answer pulling
age=$(( $(date +%s) - $(stat -c %Y -- "$dir/started") ))
[ "$age" -lt 30 ] && answer pulling
rm -rf -- "$dir/started" "$dir/auth"
answer "failed the pull stopped without a word"
"""
"""``$1`` the cache, ``$2`` the runtime, ``$3`` the hash of the reference, ``$4`` the digest
(empty: look up the reference's), ``$5`` the runtime's suffix, ``$6``/``$7`` the pinned
reference with and without transport, ``$8`` the pull directory, ``$9`` ``lookup``, ``pull``
or ``retry``, ``${10}`` the runtime's pull lines, ``${11}`` ``PULL``; then the byte counts of
the config, the login file, the user name and the password, which follow on stdin in that
order, and one newline. Answers ``ready DIGEST PATH`` and the config's line, ``pulling``,
``failed MESSAGE`` or ``missing``."""


def command(pull: ImagePull) -> tuple[list[str], bytes]:
    """The argv and stdin of one look at the cache for ``pull``."""
    mode = "lookup" if not pull.digest else "retry" if pull.retry else "pull"
    login = _login(pull)
    argv = ["sh", "-c", PROGRAM, "hpcbridge-image", pull.cache, pull.runtime,
            hashlib.sha256(pull.key.encode()).hexdigest(), pull.digest, pull.suffix,
            pull.source, pull.pinned, pull.pull_dir, mode,
            RUNTIMES[pull.runtime].pull_script(), PULL, str(len(pull.config)),
            *(str(len(part)) for part in login)]
    # One byte past the counted parts: the input is never empty, so the client always ends it
    # and every answer, which reads it to its end first, returns.
    return argv, pull.config + b"".join(login) + b"\n"


def _login(pull: ImagePull) -> tuple[bytes, bytes, bytes]:
    """The registry login as the runtimes read it: an auth file, a user name, a password."""
    if pull.credentials is None:
        return b"", b"", b""
    user, password = pull.credentials
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    host = pull.pinned.partition("/")[0]
    auth = json.dumps({"auths": {host: {"auth": token}}}).encode()
    return auth, user.encode(), password.encode()


def parse(out: str) -> PreparedImage:
    """The program's answer, or ``SchedulerError`` when it is none of its forms."""
    first, _, rest = out.partition("\n")
    verb, _, detail = first.strip().partition(" ")
    if verb == Prepared.READY:
        digest, _, path = detail.partition(" ")
        if not DIGEST.fullmatch(digest) or not path.startswith("/") or has_control(path):
            raise SchedulerError(f"the image cache answered {readable(first, 120)!r}")
        return PreparedImage(Prepared.READY, digest, path, _config(rest.strip()))
    if verb == Prepared.FAILED:
        return PreparedImage(Prepared.FAILED, message=readable(detail, 300) or "no word")
    if verb in (Prepared.PULLING, Prepared.MISSING):
        return PreparedImage(Prepared(verb))
    raise SchedulerError(f"the image cache answered {readable(first, 120)!r}")


def _config(line: str) -> ImageConfig:
    try:
        return parse_config(line.encode()) if line else ImageConfig()
    except ValueError as err:
        raise SchedulerError(f"the image cache holds a config that does not read: {err}") from err


def prepare(conn: Remote, pull: ImagePull, *, deadline: Deadline) -> PreparedImage:
    """Look at the cache for ``pull`` on the login node over ``conn``."""
    argv, stdin = command(pull)
    result = conn.run(argv, stdin=stdin, deadline=deadline)
    if result.exit_status != 0:
        raise SchedulerError(readable(result.err.strip().splitlines()[-1] if result.err.strip()
                                      else f"the image cache exited {result.exit_status}", 300))
    return parse(result.out)
