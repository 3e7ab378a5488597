"""HTCondor's pure rules: the ``spec.htcondor`` block, the submit commands hpcbridge owns,
and proc ids (``15.3`` is proc 3 of cluster 15).

``spec.htcondor.submitOptions`` become ``key = value`` lines of the submit description, after
the commands hpcbridge writes itself. A command hpcbridge owns must not be set there under any
name condor_submit reads it by, and the job ClassAd attribute it sets must not be set directly
either: ``+Attr = value`` and ``MY.Attr = value`` are applied after every command, so on the
23.9.6 test pool ``+Out = "b.out"`` wins over ``output``. ``OWNED_COMMANDS`` lists them as data;
``RESERVED_KEYS`` is derived from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hooks.core.values.fields import SpecError, mapping, whole_number
from hooks.core.values.job import Resources
from hooks.core.values.sdk import QueueLimit
from hooks.core.values.text import has_control, shown

FIELD = "spec.htcondor.submitOptions"


@dataclass(frozen=True, slots=True)
class SubmitCommand:
    """A submit command hpcbridge owns: every name condor_submit reads it by (the command
    first), and the job ClassAd attribute it sets."""

    names: tuple[str, ...]
    attribute: str


OWNED_COMMANDS: tuple[SubmitCommand, ...] = (
    # From HTCondor 23.9.6 (the test pool's version): the names are the SUBMIT_KEY_* of
    # src/condor_utils/submit_utils.h as src/condor_utils/submit_utils.cpp reads them, each with
    # the alternative its submit_param(name, alt_name) call or its row of the prunable_keywords
    # table accepts; the attributes are the ATTR_* of src/condor_includes/condor_attributes.h.
    # The manual's condor_submit page ("Submit Description File Commands") documents the first
    # name of each. output_directory came with HTCondor 24.12.
    #
    # What runs, and how:
    SubmitCommand(("universe", "JobUniverse"), "JobUniverse"),
    SubmitCommand(("executable", "Cmd"), "Cmd"),
    SubmitCommand(("arguments", "Args"), "Args"),
    SubmitCommand(("arguments2",), "Arguments"),
    SubmitCommand(("input", "stdin"), "In"),
    # Which image runs it (spec.container, within the site's policy; ContainerImage as
    # condor_submit -dry-run prints it on the test pool):
    SubmitCommand(("container_image",), "ContainerImage"),
    SubmitCommand(("docker_image",), "DockerImage"),
    SubmitCommand(("transfer_container",), "TransferContainer"),
    # Where the output goes (the log Pod reads <cluster>.<proc>.out/.err in the attempt
    # directory):
    SubmitCommand(("initialdir", "Iwd", "initial_dir", "job_iwd"), "Iwd"),
    SubmitCommand(("output", "stdout"), "Out"),
    SubmitCommand(("error", "stderr"), "Err"),
    SubmitCommand(("log", "UserLog"), "UserLog"),
    SubmitCommand(("transfer_output", "TransferOut"), "TransferOut"),
    SubmitCommand(("transfer_error", "TransferErr"), "TransferErr"),
    SubmitCommand(("transfer_output_remaps", "TransferOutputRemaps"), "TransferOutputRemaps"),
    SubmitCommand(("output_destination", "OutputDestination"), "OutputDestination"),
    SubmitCommand(("output_directory", "OutputDirectory"), "OutputDirectory"),
    # How long the job lives, and how hpcbridge finds it:
    SubmitCommand(("periodic_remove", "PeriodicRemove"), "PeriodicRemove"),
    SubmitCommand(("leave_in_queue", "LeaveJobInQueue"), "LeaveJobInQueue"),
    SubmitCommand(("batch_name", "JobBatchName"), "JobBatchName"),
)
"""The submit commands hpcbridge owns. ``periodic_remove`` itself is the exception: written
so, the user's expression is kept and combined with the time limit (see ``description``)."""

LIMITED_COMMANDS: tuple[tuple[SubmitCommand, tuple[str, ...]], ...] = (
    # Each by its names and its attribute as OWNED_COMMANDS (same sources), with the quantities
    # of hooks.core.values.sdk.LIMITED it sets. The time limit is hpcbridge's periodic_remove of
    # a proc's current run (a periodic_remove of the user's is kept beside it and can only
    # remove sooner), so what sets it is what starts a proc's run again: a release, a re-run on
    # exit, a retry, a checkpoint's restart.
    (SubmitCommand(("request_cpus", "RequestCpus"), "RequestCpus"), ("cpus",)),
    (SubmitCommand(("request_memory", "RequestMemory"), "RequestMemory"), ("memory",)),
    (SubmitCommand(("request_gpus", "RequestGPUs"), "RequestGPUs"), ("gpus",)),
    (SubmitCommand(("periodic_release", "PeriodicRelease"), "PeriodicRelease"), ("timeLimit",)),
    (SubmitCommand(("on_exit_remove", "OnExitRemove"), "OnExitRemove"), ("timeLimit",)),
    (SubmitCommand(("max_retries",), "JobMaxRetries"), ("timeLimit",)),
    (SubmitCommand(("retry_until",), "OnExitRemove"), ("timeLimit",)),
    (SubmitCommand(("checkpoint_exit_code",), "CheckpointExitCode"), ("timeLimit",)),
    (SubmitCommand(("JobCurrentStartDate",), "JobCurrentStartDate"), ("timeLimit",)),
)
"""The submit commands that set what a BatchCluster may limit."""

KEY_ATTRIBUTE = "HpcbridgeKey"
"""The job attribute naming the attempt (``+HpcbridgeKey = "<uid>-<attempt>"``)."""
USER_PERIODIC_REMOVE = "HpcbridgePeriodicRemove"
"""The job attribute holding the user's ``periodic_remove`` next to a time limit."""
PERIODIC_REMOVE = "periodic_remove"
"""The one spelling of an owned command that ``submitOptions`` may use."""
STATEMENTS = ("queue", "if", "elif", "else", "endif")
"""Statements of the submit language: hpcbridge writes the only ``queue``, and a line
``if = ...`` would be read as a conditional."""


def _reserved() -> dict[str, str]:
    """Each reserved key (lower case) and what it is, for the message."""
    reserved: dict[str, str] = {}
    for command in OWNED_COMMANDS:
        first = command.names[0]
        for name in command.names[1:]:
            reserved[name.lower()] = f"condor_submit's other name for {first}"
        attribute = f"the job attribute {command.attribute} that {first} sets"
        reserved.setdefault(command.attribute.lower(), attribute)
        reserved[f"+{command.attribute.lower()}"] = attribute
        reserved[f"my.{command.attribute.lower()}"] = attribute
        reserved[first.lower()] = f"the {first} command"
    for attribute in (KEY_ATTRIBUTE, USER_PERIODIC_REMOVE):
        for key in (attribute, f"+{attribute}", f"MY.{attribute}"):
            reserved[key.lower()] = f"the job attribute {attribute}"
    for statement in STATEMENTS:
        reserved[statement] = f"the {statement} statement"
    del reserved[PERIODIC_REMOVE]
    return reserved


RESERVED: Mapping[str, str] = _reserved()
LIMITED: Mapping[str, tuple[str, ...]] = {
    key.lower(): quantities
    for command, quantities in LIMITED_COMMANDS
    for key in (*command.names, command.attribute, f"my.{command.attribute}")
}
"""The quantities each key sets (lower case, ``+Attr`` read as ``my.attr``)."""
RESERVED_KEYS = frozenset(RESERVED)
"""Every key ``submitOptions`` may not use, in lower case: matching is case-insensitive, as
condor_submit's is."""


@dataclass(frozen=True, slots=True)
class HTCondorOptions:
    queue: int = 1
    submit_options: tuple[tuple[str, str], ...] = ()


TASK_ID = re.compile(r"([0-9]{1,20})(?:\.[0-9]{1,10})?")
"""A proc id as HTCondor reports one, group 1 its cluster: ``15`` or ``15.3``. Stored ids go
to ``condor_rm``, ``condor_hold`` and ``condor_release``, so nothing else is ever taken."""


class HTCondorRules:
    name = "htcondor"
    task_id_pattern = TASK_ID
    queue_limit: QueueLimit | None = None
    parallel_launcher: tuple[str, ...] = ()
    own_containers = True

    def parse_options(self, raw: Mapping[str, Any], resources: Resources) -> HTCondorOptions:
        """The ``spec.htcondor`` block. Pure: no I/O."""
        if resources.nodes is not None:
            raise SpecError("spec.resources.nodes applies to SLURM only; remove it for HTCondor.")
        queue = whole_number(raw.get("queue", 1), "spec.htcondor.queue", minimum=1,
                             maximum=10000)
        options = mapping(raw.get("submitOptions") or {}, FIELD)
        checked = tuple(_submit_option(key, value) for key, value in sorted(options.items()))
        seen: dict[str, str] = {}
        for key, _ in checked:
            same = seen.setdefault(_command_of(key), key)
            if same != key:
                raise SpecError(f"{FIELD} sets {shown(same)} and {shown(key)}, which "
                                "condor_submit reads as the same command; keep one.")
        return HTCondorOptions(queue=queue, submit_options=checked)

    def check_script(self, script: str) -> None:
        """condor_submit reads the description, never the script: nothing in it is refused."""

    def free_form_settings(self, options: HTCondorOptions, script: str
                           ) -> Iterator[tuple[str, str]]:
        """The limited quantities ``spec.htcondor.submitOptions`` set; the script sets none."""
        for key, _ in options.submit_options:
            for quantity in LIMITED.get(_command_of(key), ()):
                yield f"{FIELD}[{shown(key)}]", quantity

    def expected_tasks(self, options: HTCondorOptions, job_id: str) -> tuple[str, ...]:
        return tuple(f"{job_id}.{proc}" for proc in range(options.queue))

    def job_id(self, task_id: str) -> str:
        return job_id(task_id)


def job_id(task_id: str) -> str:
    """The cluster id of a proc id (``15.3`` → ``15``)."""
    return task_id.split(".", 1)[0]


def reserved_key(key: str) -> str | None:
    """What ``key`` would set that hpcbridge owns (for the message), or None.

    >>> reserved_key("Initial_Dir")
    "condor_submit's other name for initialdir"
    >>> reserved_key("+Out")
    'the job attribute Out that output sets'
    >>> reserved_key("periodic_remove") is None and reserved_key("+ProjectName") is None
    True
    """
    return RESERVED.get(_command_of(key))


def _command_of(key: str) -> str:
    """``key`` as condor_submit tells keys apart: in lower case, ``MY.Attr`` for ``+Attr``."""
    lowered = key.lower()
    if lowered.startswith("+"):
        lowered = "my." + lowered[1:]
    # "+MY.Out" sets no Out on 23.9.6, but it is no attribute anyone needs either.
    while lowered.startswith("my.my."):
        lowered = lowered[3:]
    return lowered


def _submit_option(key: str, value: object) -> tuple[str, str]:
    if not isinstance(value, str):
        raise SpecError(f"{FIELD}[{shown(key)}] must be a string.")
    if any(c in key or c in value for c in "\n\r"):
        first_line = (key.splitlines() or [""])[0]
        raise SpecError(
            f"{FIELD}[{shown(first_line)}] contains a newline, which would start a new submit "
            "command."
        )
    if has_control(key) or has_control(value):
        raise SpecError(
            f"{FIELD}[{shown(key)}] contains a control character (a tab, NUL, ESC...); a "
            "submit command is one line of printable text."
        )
    if value.rstrip().endswith("\\"):
        raise SpecError(
            f"{FIELD}[{shown(key)}] ends in a backslash, which would continue the command on "
            "the next line of the submit description."
        )
    if not _submit_key_ok(key):
        raise SpecError(
            f"{FIELD} has key {shown(key)}; keys are submit commands like request_disk or "
            "+Attribute."
        )
    reserved = reserved_key(key)
    if reserved is not None:
        instead = "write periodic_remove instead" if PERIODIC_REMOVE in reserved else "remove it"
        raise SpecError(
            f"{FIELD} sets {shown(key)}, {reserved}, which hpcbridge manages; {instead}."
        )
    if key.lower() == PERIODIC_REMOVE:
        _check_periodic_remove(key, value)
    return key, value


def _submit_key_ok(key: str) -> bool:
    body = key[1:] if key.startswith("+") else key
    body = body[3:] if body.lower().startswith("my.") else body
    return bool(body) and all(c.isascii() and (c.isalnum() or c in "_.") for c in body)


def _check_periodic_remove(key: str, value: str) -> None:
    """The user's ``periodic_remove`` must be one closed expression: the description keeps it
    in a job attribute of its own next to a time limit (so condor_submit parses it alone), and
    this refuses early what could only be meant to escape it: a parenthesis closed that it did
    not open or left open, outside string literals; and what would make that count differ from
    the ClassAd parser's — a backslash (an escape in some string literals, not in others), a
    quoted attribute name, a comment, and a ``$`` (condor_submit expands macros before it
    parses the expression).

    >>> _check_periodic_remove("periodic_remove", 'NumJobStarts > 3 || Owner == "a)"')
    """
    where = f"{FIELD}[{shown(key)}]"
    for text, what in (("\\", "a backslash"), ("'", "a quoted attribute name"),
                       ("$", "a $ (condor_submit would expand it as a macro first)")):
        if text in value:
            raise SpecError(f"{where} may not contain {what}, as hpcbridge combines it with "
                            "the time limit.")
    depth, i = 0, 0
    while i < len(value):
        char = value[i]
        if char == '"':
            end = value.find('"', i + 1)
            if end < 0:
                raise SpecError(f"{where} leaves a string literal open; write one expression, "
                                "as hpcbridge combines it with the time limit.")
            i = end + 1
            continue
        if value.startswith(("/*", "*/", "//"), i):
            raise SpecError(f"{where} may not contain a comment, as hpcbridge combines it with "
                            "the time limit.")
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            raise SpecError(f"{where} closes a parenthesis it did not open; write one "
                            "expression, as hpcbridge combines it with the time limit.")
        i += 1
    if depth:
        raise SpecError(f"{where} leaves a parenthesis open; write one expression, as "
                        "hpcbridge combines it with the time limit.")
