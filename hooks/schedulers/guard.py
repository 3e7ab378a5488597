"""Exactly-once submission as one remote command, shared by every scheduler.

The attempt's directory is the guard: ``mkdir`` is atomic, so of all calls racing to submit an
attempt exactly one creates it (and the ``.guard`` file whose age dates it: the job itself
writes into the directory) and submits; the job id it records in ``jobid`` answers every
later call. A call that finds the guard held with no id answers "in flight". A guard older than
``stale`` seconds with no id recorded belongs to a submission that died: the call looks the
attempt up on the scheduler by name (a job found there is recorded, not resubmitted) and only
then takes the guard over with a second atomic ``mkdir`` (``takeover.N``) and submits again.
``stale`` must exceed the longest remote command, which the remote ``timeout`` bounds.

Its files (the script, the scheduler's description, the env file, the input files) are
written from stdin before anything is submitted, sub-directories included; a file whose upload
was cut short stops the submission. Inputs the inputs mover staged beside the attempt's
directory (``staging``, complete once its ``.staged`` marker is there) are moved in first, each
top-level entry with one ``rename``; ``.staged-in`` records that all were, so a retried
submission moves the rest and never submits without them. A refusal by the scheduler is recorded
in ``refused`` and answered again to later calls; a
transient failure (scheduler unreachable) leaves the guard to go stale, because whether the job
reached the scheduler is then unknown and only the lookup can tell.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from hooks.core.spec.layout import RESOLVE
from hooks.core.values.job import JobRequest, SubmitAnswer, SubmitOutcome
from hooks.core.values.sdk import SchedulerError
from hooks.deadline import Deadline
from hooks.schedulers.files import ENV_FILE
from hooks.ssh.client import Completed, Remote

FILES = frozenset({"script", "submit.out", "submit.err", "jobid", "jobid.tmp", "refused"})
"""The files a guarded submission writes at the top of the attempt directory, besides
``.guard`` and ``takeover.N`` (see ``writes_file``)."""


def writes_file(name: str) -> bool:
    """Whether the guard writes a file of this name at the top of an attempt's directory.

    >>> [writes_file(n) for n in ("jobid", "takeover.2", "takeover", "data")]
    [True, True, False, False]
    """
    return name in FILES or name.startswith(("takeover.", "."))
"""Shell: the remote directory ``$1`` as a path: absolute, or relative to the home directory
(``spec.cluster.workDir``)."""
PROGRAM = r"""
set -u
""" + RESOLVE + r"""
stale=$2; transient=$3; lookup=$4; shift 4
staging=; case $1 in */*) staging=$1; shift ;; esac
nfiles=$1; shift
umask 077
# Every answer reads stdin to its end first: a command that exits before the client's EOF
# arrives lets sshd free the channel, and OpenSSH drops the whole connection on that late EOF.
answer() { cat > /dev/null; printf '%s\n' "$*"; exit 0; }
say_existing() { answer existing "$(head -n 1 -- "$d/jobid")"; }
mkdir -p -- "${d%/*}" || answer error cannot create "${d%/*}"
if mkdir -- "$d" 2>/dev/null; then
  : > "$d/.guard"
else
  [ -s "$d/jobid" ] && say_existing
  [ -e "$d/refused" ] && answer refused "$(grep -v '^[[:space:]]*$' "$d/refused" | tail -n 1)"
  n=0; while [ -d "$d/takeover.$((n + 1))" ]; do n=$((n + 1)); done
  marker=$d/.guard; [ -e "$marker" ] || marker=$d; [ "$n" -gt 0 ] && marker=$d/takeover.$n
  age=$(( $(date +%s) - $(stat -c %Y -- "$marker") ))
  [ "$age" -lt "$stale" ] && answer inflight
  found=$(sh -c "$lookup" < /dev/null) || answer inflight
  if [ -n "$found" ]; then
    printf '%s\n' "$found" > "$d/jobid.tmp" && mv -f -- "$d/jobid.tmp" "$d/jobid"
    say_existing
  fi
  mkdir -- "$d/takeover.$((n + 1))" 2>/dev/null || answer inflight
  [ -s "$d/jobid" ] && say_existing
fi
cd -- "$d" || answer error cannot enter "$d"
if [ -n "$staging" ] && [ ! -e .staged-in ]; then
  case $staging in /*) s=$staging ;; *) s=$HOME/$staging ;; esac
  [ -f "$s/.staged" ] || answer error the inputs are not staged in "$staging"
  for f in "$s"/* "$s"/.[!.]* "$s"/..?*; do
    case ${f##*/} in .staged|.*.part) continue ;; esac
    [ -e "$f" ] || continue
    [ -e "${f##*/}" ] || mv -- "$f" ./ || answer error cannot move the staged "${f##*/}"
  done
  mv -f -- "$s/.staged" .staged-in && rm -rf -- "$s" || answer error cannot finish staging
fi
i=0
while [ "$i" -lt "$nfiles" ]; do
  case $1 in */*) mkdir -p -- "${1%/*}" || answer error cannot create "${1%/*}" ;; esac
  head -c "$2" > "$1" && [ "$(wc -c < "$1")" -eq "$2" ] \
    || answer error the upload of "$1" was cut short
  shift 2; i=$((i + 1))
done
cat > /dev/null
if "$@" > submit.out 2> submit.err < /dev/null; then
  id=$(head -n 1 submit.out | cut -d ';' -f 1 | cut -d ' ' -f 1 | tr -d '\r')
  printf '%s\n' "$id" > jobid.tmp && mv -f jobid.tmp jobid
  printf 'submitted %s\n' "$id"
elif grep -Eq -- "$transient" submit.err; then
  printf 'transient %s\n' "$(grep -v '^[[:space:]]*$' submit.err | tail -n 1)"
else
  cp submit.err refused
  printf 'refused %s\n' "$(grep -v '^[[:space:]]*$' submit.err | tail -n 1)"
fi
"""


def command(
    *,
    remote_dir: str,
    files: Sequence[tuple[str, bytes]],
    submit: Sequence[str],
    lookup: str,
    transient: str,
    stale_seconds: int,
    staging: str = "",
) -> tuple[list[str], bytes]:
    """The argv and stdin of one guarded submission.

    ``files`` are written into the attempt directory from stdin, in order; ``submit`` runs in
    that directory; ``lookup`` is a shell command that prints the attempt's job id if the
    scheduler knows a job by the attempt's name; ``transient`` is an extended regexp matching
    the submit command's errors that mean "try again later" rather than "refused"; ``staging``
    is the directory of staged inputs to move in first (a path with a '/', given only when
    there is one), or empty.
    """
    argv = ["sh", "-c", PROGRAM, "hpcbridge-submit", remote_dir, str(stale_seconds), transient,
            lookup, *([staging] if staging else []), str(len(files))]
    for name, content in files:
        argv += [name, str(len(content))]
    return [*argv, *submit], b"".join(content for _, content in files)


def parse(output: str) -> tuple[str, str]:
    """The (verb, rest) of the program's answer line."""
    verb, _, rest = output.strip().partition(" ")
    return verb, rest.strip()


def submit(
    conn: Remote, job: JobRequest, *, files: Sequence[tuple[str, bytes]],
    submit: Sequence[str], lookup: str, transient: str, deadline: Deadline,
) -> Completed:
    """Run one guarded submission of ``job``'s attempt (see ``command``)."""
    argv, stdin = command(remote_dir=job.remote_dir, files=files, submit=submit, lookup=lookup,
                          transient=transient, stale_seconds=job.guard_stale,
                          staging=job.staging)
    return conn.run(argv, stdin=stdin, deadline=deadline)


def outcome(
    result: Completed, *, job_id: re.Pattern[str], program: str,
    detail: Callable[[Completed], str],
) -> SubmitOutcome:
    """The guard's answer. A job id is group 1 of ``job_id`` matched against what the submit
    command (``program``) printed; a broken run is a ``SchedulerError`` with ``detail``."""
    verb, rest = parse(result.out)
    answers = {a.value: a for a in SubmitAnswer}
    if result.exit_status != 0 or verb not in answers:
        raise SchedulerError(detail(result) or f"submission exited {result.exit_status}")
    answer = answers[verb]
    if answer not in (SubmitAnswer.SUBMITTED, SubmitAnswer.EXISTING):
        return SubmitOutcome(answer, message=rest)
    match = job_id.match(rest)
    if match is None:
        return SubmitOutcome(SubmitAnswer.REFUSED, message=f"{program} printed {rest!r}")
    return SubmitOutcome(answer, job_id=match.group(1), message=rest)


CLEANUP = r"""
set -u
""" + RESOLVE + r"""
root=$d; stale=$2
[ -d "$root" ] || { echo gone; exit 0; }
now=$(date +%s)
for g in "$root"/attempt-*; do
  [ -d "$g" ] || continue
  { [ -s "$g/jobid" ] || [ -e "$g/refused" ]; } && continue
  marker=$g/.guard; [ -e "$marker" ] || marker=$g
  newest=$(stat -c %Y -- "$marker" "$g"/takeover.* 2>/dev/null | sort -n | tail -n 1)
  [ $((now - newest)) -lt "$stale" ] && { echo busy; exit 0; }
done
rm -rf -- "$root" && echo removed
"""


def cleanup_command(*, root: str, stale_seconds: int) -> list[str]:
    """Remove a BatchJob's remote directory, unless a submission may still be in flight there.

    Answers ``removed``, ``gone`` (nothing there) or ``busy`` (a guard without a job id is
    younger than ``stale_seconds``).
    """
    return ["sh", "-c", CLEANUP, "hpcbridge-cleanup", root, str(stale_seconds)]


ENDED = "ended"
"""The file in an attempt's directory that holds its final phase once the hooks saw it end."""
MARK_ENDED = (RESOLVE + '; umask 077; cd -- "$d" && printf "%s\\n" "$2" > ended.tmp'
              f' && mv -f ended.tmp ended && rm -f {ENV_FILE}')


def mark_ended_command(*, remote_dir: str, phase: str) -> list[str]:
    """Write ``phase`` into the attempt directory's ``ended`` file (mode 0600, as every file the
    guard writes), atomically, and remove the attempt's env file
    (``hooks.schedulers.files.ENV_FILE``)."""
    return ["sh", "-c", MARK_ENDED, "hpcbridge-mark-ended", remote_dir, phase]
