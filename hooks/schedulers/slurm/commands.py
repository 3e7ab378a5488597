"""The SLURM commands of an attempt, rendered as argv lists and shell text. Pure: no I/O.

Jobs carry the name ``hpcb-<uid>-<attempt>``; clients run with ``TZ=UTC`` so that times print
in UTC; output is read from ``-o``/``--parsable2`` text, not ``--json`` (SLURM 22.05's JSON
ignores squeue filters and reports wrong exit codes in sacct).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from hooks.core.values.job import JobRequest
from hooks.schedulers.files import ENV_FILE
from hooks.schedulers.slurm import forms
from hooks.schedulers.slurm.rules import SlurmOptions

NAME_PREFIX = "hpcb-"
SQUEUE_FORMAT = "%i|%j|%T|%r|%V|%S|%e|%F|%P"
SACCT_FIELDS = ("JobID,JobName,State,ExitCode,Submit,Start,End,Reason,"
                "Elapsed,TotalCPU,MaxRSS,NodeList,AllocCPUS,ReqMem")
"""The allocation's line of each task and its steps' (``4242.batch``): the steps carry
``MaxRSS``."""
TRANSIENT_ERRORS = (
    "Unable to contact slurm controller|Socket timed out|Zero Bytes were transmitted|"
    "Transport endpoint|temporarily unavailable|Slurm backup controller in standby"
)
"""sbatch's errors that mean "the controller could not be asked", not "refused"."""
SACCT_CHUNK = 500


def job_name(key: str) -> str:
    """The attempt's job name: how squeue, sacct and the guard's lookup find it."""
    return NAME_PREFIX + key


EXPORT = ('f=$1; shift; env -0 | cat - "$f" > "$f.tmp" && mv -f -- "$f.tmp" "$f" || exit 1; '
          '"$@"; rc=$?; rm -f -- "$f"; exit "$rc"')
"""Shell: put the login environment before the attempt's own variables in the env file
(``$1``, NUL-separated), run sbatch, and remove the file. ``sbatch --export-file`` gives the
job exactly the file's variables, the last of a name winning: the job sees what a plain sbatch
passes on, plus ``spec.env``, whose values never appear on a command line; slurmctld keeps
them with the job, so the file is not needed once sbatch has returned."""


def submit_argv(job: JobRequest) -> list[str]:
    """The submission of one attempt, run in its directory: sbatch, after the env file
    (``hooks.schedulers.files.ENV_FILE``) has been completed when the attempt has one."""
    if not job.environment:
        return sbatch_argv(job)
    return ["sh", "-c", EXPORT, "hpcbridge-export", ENV_FILE, *sbatch_argv(job)]


IN_PLACE = ('p=$(printf "%s\\n" "$PWD" | sed "s/%/%%/g"); o=$1; shift; '
            'exec sbatch "--output=$p/$o.out" "--error=$p/$o.err" "$@"')
"""Shell: sbatch with its output and error files in the attempt's directory, the current one,
named by sbatch's pattern ``$1``. sbatch expands ``%`` in these paths, the directory's
included (a relative path is taken from it), so each ``%`` of the directory is written
``%%``: ``spec.cluster.workDir`` may hold one, and ``~/out-%j`` is then a directory of that
name."""


def sbatch_argv(job: JobRequest) -> list[str]:
    """The sbatch command of one attempt, run in its directory."""
    spec, res = job.spec, job.spec.resources
    opts: SlurmOptions = spec.options
    pattern = "%A_%a" if opts.array else "%j"
    argv = [
        "sh", "-c", IN_PLACE, "hpcbridge-sbatch", pattern,
        "--parsable", "--ignore-pbs", f"--job-name={job_name(job.key)}",
        f"--comment={job.namespace}/{job.name}",
    ]
    if job.environment:
        argv.append(f"--export-file={ENV_FILE}")
    named = {
        "--array": opts.array,
        "--partition": opts.partition,
        "--account": opts.account,
        "--qos": opts.qos,
        "--cpus-per-task": res.cpus,
        "--mem": f"{res.memory_mib}M" if res.memory_mib else None,
        "--gpus": res.gpus,
        "--time": forms.slurm_time(res.time_limit_seconds) if res.time_limit_seconds else None,
        "--nodes": res.nodes,
    }
    argv += [f"{flag}={value}" for flag, value in named.items() if value is not None]
    return [*argv, *opts.extra_args, "script"]


def lookup(key: str) -> str:
    """Shell: print the job id of attempt ``key`` from squeue, else from sacct; fail when
    either cannot be asked, so that the guard never resubmits blindly."""
    quoted = shlex.quote(job_name(key))
    return (
        f"found=$(squeue -h -t all --name={quoted} -o %F) || exit 1; "
        'if [ -z "$found" ]; then '
        f"found=$(sacct -n -X -P -S now-60days --name={quoted} -o JobID) || exit 1; fi; "
        'printf "%s\n" "$found" | head -n 1 | cut -d _ -f 1'
    )


SQUEUE = ["env", "TZ=UTC", "sh", "-c", 'exec squeue -a -h -r -t all -u "$(id -un)" -o "$1"',
          "squeue", SQUEUE_FORMAT]
"""The login user's jobs in squeue, finished ones inside MinJobAge included."""


def sacct(job_ids: Sequence[str]) -> list[str]:
    return ["env", "TZ=UTC", "sacct", "-n", "-P", "-j", ",".join(job_ids),
            "-o", SACCT_FIELDS]
