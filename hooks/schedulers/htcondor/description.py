"""The HTCondor submit description of one attempt, and ClassAd string quoting. Pure: no I/O.

``condor_submit`` reads the description on stdin in the attempt directory, which is therefore
the job's initial directory: the uploaded ``script`` is the executable, each proc writes
``<cluster>.<proc>.out``/``.err`` there (the names the log Pod lists) and the user log is
``job.log``. ``transfer_executable = true`` makes the same description work on pools without a
shared filesystem (the script then travels to the execute node, and ``transfer_input_files``
takes the input files and the env file along); with a shared filesystem HTCondor runs it in
place, which is why the submit command makes it executable first. With ``spec.env`` the
executable is ``hooks.schedulers.files.WRAPPER``, which reads the env file and runs the
script: the values never enter the description or the job ad.

HTCondor 23.x has no ``periodic_remove_reason``: a job removed by ``periodic_remove`` gets the
RemoveReason ``The job attribute PeriodicRemove expression '<expression>' evaluated to TRUE``.
The time-limit expression therefore carries ``TIME_LIMIT_MARKER`` as an (always true) string
comparison, so that the removal reason names it and ``htcondor_states`` maps it to Timeout.
The shadow evaluates the expression on each update from the starter and the schedd every
``PERIODIC_EXPR_INTERVAL`` (60 s by default), so a job stops up to that long after its limit.

An attempt whose image the pool runs itself (``JobRequest.pool_image``) is a container universe
job instead: ``container_image`` names the SIF file in the site's cache (never transferred:
the cache is shared) or a ``docker://`` reference pinned by digest, and the job always runs in
HTCondor's scratch directory with file transfer (``should_transfer_files = YES``), because
the pool's runtime binds that directory into the container and no other: the inputs go in, and
what the job writes comes back to the attempt's directory when it exits.

A ``periodic_remove`` of the user's is never pasted into that expression: next to a time limit
it becomes the job attribute ``HpcbridgePeriodicRemove``, which condor_submit parses on its own
(text that does not parse fails the submission) and the time limit's expression only refers to,
``(<time limit>) || MY.HpcbridgePeriodicRemove``. No text of theirs can therefore close the time
limit's parentheses, even through a macro; ``rules`` also refuses such text early.
"""

from __future__ import annotations

from hooks.core.values.image import SUBMITTABLE
from hooks.core.values.job import JobRequest
from hooks.schedulers.files import ENV_FILE, WRAPPER, input_tops
from hooks.schedulers.htcondor.rules import KEY_ATTRIBUTE as KEY_ATTRIBUTE
from hooks.schedulers.htcondor.rules import PERIODIC_REMOVE, USER_PERIODIC_REMOVE, HTCondorOptions
from hooks.schedulers.htcondor.states import TIME_LIMIT_MARKER, USER_PART

OUTPUT = "$(Cluster).$(Process).out"
ERROR = "$(Cluster).$(Process).err"
USER_LOG = "job.log"


def classad_string(value: str) -> str:
    """``value`` as a ClassAd string literal, valid in a submit description and a constraint.

    A double quote is escaped as ``\\"``. A backslash cannot be written portably: job ads use
    the old ClassAd syntax, where ``"a\\\\b"`` in a submit file is *two* backslashes (checked on
    HTCondor 23.9.6) while a ``-constraint`` reads it as one, so backslashes are refused, and
    so are line breaks and NUL, which would end the command.

    >>> print(classad_string('say "hi"'))
    "say \\"hi\\""
    """
    if any(c in value for c in "\\\n\r\0"):
        raise ValueError(f"{value!r} cannot be a ClassAd string here (backslash or line break)")
    return '"' + value.replace('"', '\\"') + '"'


def submit_string(value: str) -> str:
    """``value`` quoted for a submit description: ``classad_string`` with ``$`` written as
    ``$(DOLLAR)``, because condor_submit expands ``$(...)`` macros even inside quotes.

    >>> print(submit_string("cost $5"))
    "cost $(DOLLAR)5"
    """
    return classad_string(value).replace("$", "$(DOLLAR)")


def time_limit_expression(seconds: int) -> str:
    """True once a running proc has run longer than ``seconds`` in its current run."""
    return (
        f"JobStatus == 2 && time() - JobCurrentStartDate > {seconds} "
        f"&& {classad_string(TIME_LIMIT_MARKER)} != \"\""
    )


def submit_description(job: JobRequest) -> str:
    """The submit description of ``job``'s attempt, ending in ``queue N``.

    ``spec.htcondor.submitOptions`` follow the generated commands, so they can override those
    that are not reserved (``request_*``, ``should_transfer_files``, ...); a ``periodic_remove``
    of theirs is kept next to the time limit, by reference (see above), so that neither is lost.
    """
    spec, res = job.spec, job.spec.resources
    opts: HTCondorOptions = spec.options
    lines = [
        f"# hpcbridge: {job.namespace}/{job.name} attempt {job.attempt}",
        *_universe(job.pool_image),
        f"executable = {WRAPPER if job.environment else 'script'}",
        "transfer_executable = true",
        f"output = {OUTPUT}",
        f"error = {ERROR}",
        f"log = {USER_LOG}",
        f"+{KEY_ATTRIBUTE} = {submit_string(job.key)}",
        f"batch_name = {submit_string(f'{job.namespace}/{job.name}')}",
    ]
    if res.cpus is not None:
        lines.append(f"request_cpus = {res.cpus}")
    if res.memory_mib is not None:
        lines.append(f"request_memory = {res.memory_mib}")
    if res.gpus:
        lines.append(f"request_gpus = {res.gpus}")
    if spec.logs_follow:
        lines += ["stream_output = true", "stream_error = true"]
    travelling = (["script", ENV_FILE] if job.environment else []) + input_tops(job)
    if travelling:
        lines.append(f"transfer_input_files = {', '.join(travelling)}")
    theirs = [(k, v) for k, v in opts.submit_options if k.lower() != PERIODIC_REMOVE]
    their_remove = next(
        (v for k, v in opts.submit_options if k.lower() == PERIODIC_REMOVE), None)
    lines += _removal(res.time_limit_seconds, their_remove)
    lines += [f"{key} = {value}" for key, value in theirs]
    lines.append(f"queue {opts.queue}")
    return "\n".join(lines) + "\n"


def _universe(image: str) -> list[str]:
    """The universe of the attempt: vanilla, or the container universe running ``image``."""
    if not image:
        return ["universe = vanilla"]
    if not SUBMITTABLE.fullmatch(image):
        raise ValueError(f"{image!r} cannot be a container_image (space, quote, # or $)")
    return ["universe = container", f"container_image = {image}", "transfer_container = false",
            "should_transfer_files = YES", "when_to_transfer_output = ON_EXIT"]


def _removal(time_limit: int | None, theirs: str | None) -> list[str]:
    """The ``periodic_remove`` of the time limit and the user's own, which stays a job
    attribute of its own beside the limit's, never pasted into its expression."""
    limit = time_limit_expression(time_limit) if time_limit else None
    if limit is not None and theirs is not None:
        return [f"+{USER_PERIODIC_REMOVE} = {theirs}",
                f"{PERIODIC_REMOVE} = ({limit}) || {USER_PART}"]
    if limit is not None or theirs is not None:
        return [f"{PERIODIC_REMOVE} = {limit if limit is not None else theirs}"]
    return []
