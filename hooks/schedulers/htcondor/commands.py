"""The HTCondor commands of an attempt, rendered as argv lists, constraints and shell text.
Pure: no I/O."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from hooks.schedulers.htcondor.description import KEY_ATTRIBUTE, classad_string
from hooks.schedulers.htcondor.parse import ANALYSIS, ATTRIBUTES

SUBMIT_PROGRAM = r"""
chmod 700 script || exit
[ ! -e hpcbridge-run ] || chmod 700 hpcbridge-run || exit
condor_submit -terse < submit.sub 2> condor_submit.err
rc=$?
msg=$(tr -s '\n\t ' '   ' < condor_submit.err)
msg=${msg# }; msg=${msg% }
[ -z "$msg" ] || printf '%s\n' "$msg" >&2
exit "$rc"
"""
"""Run by the guard in the attempt directory: make the script executable (the guard writes
files without the exec bit, and a shared filesystem runs it in place), submit with the
description on stdin (``condor_submit -`` would dump the job ad instead), and join condor_submit's
multi-line errors (``ERROR: Parse error in expression:`` / the expression / a blank line) into
one line, because the guard reports the last line of stderr."""
SUBMIT = ("sh", "-c", SUBMIT_PROGRAM, "hpcbridge-condor-submit")
TRANSIENT_ERRORS = (
    "Failed to connect to local queue manager|Can't find address of local schedd|"
    "Failed to commit job submission|CEDAR:600[0-9]|SECMAN:20[0-9][0-9]|"
    "Connection refused|timed out|temporarily unavailable"
)
"""condor_submit's errors when the schedd cannot be asked (real 23.9.6 messages: schedd gone
from its address ``Failed to connect to local queue manager`` + ``CEDAR:6001:Failed to connect
to <...>`` or ``SECMAN:2011:...``; no address and no collector ``Can't find address of local
schedd``), as opposed to a refused description (``ERROR: on Line 3 of submit file: ...``)."""
CONTAINER_SUPPORT = (
    "sh", "-c",
    "a=$(condor_status -startd -constraint 'HasContainer =?= true' -af HasSIF HasDockerURL) "
    '|| exit; printf "%s\\n" "$a" | sort -u',
    "hpcbridge-condor-containers",
)
"""What the pool's execute nodes run themselves: ``HasSIF`` and ``HasDockerURL`` of every slot
that advertises ``HasContainer`` (what condor_submit 23.9.6 requires of a container universe
job with a SIF path or a ``docker://`` reference), one line per distinct answer, so the
output stays short on a pool of any size."""
KEY_CHUNK = 400
"""Keys per condor_q/condor_history constraint: about 16 KB of command line at most."""
OURS = f"{KEY_ATTRIBUTE} isnt undefined"
"""Every job of ours in the queue: one condor_q answers for any number of attempts."""
NOT_DYNAMIC = 'SlotType =!= "Dynamic"'
"""The slots that stand for whole machines: a dynamic slot is part of its partitionable slot."""
PASSED_OVER = ("JobStatus == 1 && (NumJobMatches =?= undefined || NumJobMatches == 0) "
               "&& LastRejMatchReason isnt undefined")
"""An idle job the negotiator passed over and never matched."""
ONE_EACH = ('$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && ($1 == "undefined" || !seen[$1]++) '
            '{ print $2 "." $3 }')
"""awk over ``AutoClusterId ClusterId ProcId``: the id of one job of each autocluster (jobs of an
autocluster match the same machines), only ever digits and a dot."""
TOTALS = (
    'function flush(i) { for (i = 1; i <= n; i++) '
    'print ((("totalslot" tolower(name[i])) in has) ? name[i] " = TotalSlot" name[i] : line[i]); '
    'n = 0; split("", has) } '
    'NF == 0 { flush(); print; next } '
    '{ line[++n] = $0; name[n] = $1; has[tolower($1)] = 1 } '
    'END { flush() }'
)
"""awk over ``condor_status -long``: each resource of a slot that has a total (``Cpus`` beside
``TotalSlotCpus``; ``Memory``, ``Disk``, ``GPUs``...) becomes its total, as HTCondor's own
analysis simulates a drained partitionable slot: a machine whose dynamic slots are busy still
offers what it has in all."""
QUEUE_PROGRAM = (
    'q=$(condor_q -constraint "$1" -json -attributes "$2") || exit; printf "%s\\n" "$q"; '
    "case $q in *'\"LastRejMatchReason\"'*) "
    f'ids=$(condor_q -constraint "($1) && "{shlex.quote(PASSED_OVER)} '
    f"-af AutoClusterId ClusterId ProcId | awk {shlex.quote(ONE_EACH)}); "
    f'[ -z "$ids" ] || {{ echo {shlex.quote(ANALYSIS)}; '
    f"condor_status -long -constraint {shlex.quote(NOT_DYNAMIC)} | awk {shlex.quote(TOTALS)} | "
    "condor_q -better-analyze -slotads /dev/stdin $ids || true; }; esac"
)
"""Shell: condor_q of the jobs matching ``$1``, as JSON with the attributes ``$2``. When a job
it lists was passed over by the negotiator, HTCondor's matchmaking analysis of one such job per
autocluster follows, after a line ``ANALYSIS``, in the same command: its whole Requirements
judged against every machine of the pool with all of the machine's resources free (the
partitionable and static slots, ``TOTALS``), which tells ``Unschedulable`` from queueing and
names the clauses no machine meets. A pool whose slots or analysis cannot be had leaves every
idle job ordinary queueing."""


def ads(tool: str, constraint: str, extra: Sequence[str] = ()) -> list[str]:
    """condor_q or condor_history of the matching jobs, as JSON with the attributes we read."""
    return [tool, "-constraint", constraint, *extra, "-json", "-attributes", ",".join(ATTRIBUTES)]


def queue(constraint: str) -> list[str]:
    """condor_q of the matching jobs, as ``ads``, and the analysis of those the negotiator
    passed over (``QUEUE_PROGRAM``)."""
    return ["sh", "-c", QUEUE_PROGRAM, "condor_q", constraint, ",".join(ATTRIBUTES)]


def lookup(key: str) -> str:
    """Shell: print the cluster id of the attempt ``key`` from the queue, else the history.

    Fails (non-zero) when condor_q or condor_history fails, so that the guard never takes a
    stale guard over, and submits again, because the schedd could not be asked."""
    constraint = shlex.quote(f"{KEY_ATTRIBUTE} == {classad_string(key)}")
    return (
        f"q=$(condor_q -constraint {constraint} -af ClusterId) || exit 1; "
        f'[ -n "$q" ] || q=$(condor_history -constraint {constraint} -limit 1 -af ClusterId) '
        '|| exit 1; printf "%s\\n" "$q" | head -n 1'
    )


def key_constraint(keys: Sequence[str]) -> str:
    """A constraint matching the job ads of the attempts ``keys``."""
    listed = classad_string(",".join(keys))
    return f"{KEY_ATTRIBUTE} isnt undefined && stringListMember({KEY_ATTRIBUTE}, {listed}, \",\")"


def batchjob_constraint(uid: str) -> str:
    """A constraint matching every attempt of the BatchJob ``uid``."""
    prefix = f"{uid}-"
    return f"substr({KEY_ATTRIBUTE}, 0, {len(prefix)}) == {classad_string(prefix)}"
