"""Validation of a BatchJob spec: the rules the CRD cannot express, and the CRD's own again.

The hooks may run behind an older CRD, or as a DecoratorController, so they never trust that the
API server has checked anything. ``parse_spec`` turns the raw spec into a frozen ``Spec`` or raises
``SpecError`` with one sentence that names the field and the expected form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hooks.core import units
from hooks.core.model import ClusterRef, HTCondorOptions, Resources, SlurmOptions, Spec

BACKENDS = ("slurm", "htcondor")
MAX_SCRIPT_BYTES = 256 * 1024

RESERVED_SLURM_LONG = (
    "job-name", "output", "error", "array", "parsable", "comment", "chdir", "wrap",
)
RESERVED_SLURM_SHORT = frozenset("JoeaD")
SLURM_SHORT_FLAGS = frozenset("HhkOQsuVvW")
"""sbatch's short options that take no value: others may be bundled after them (``-vJx``)."""
RESERVED_HTCONDOR_KEYS = frozenset(
    {
        "executable", "arguments", "output", "error", "log", "queue", "universe",
        "leave_in_queue", "batch_name", "+hpcbridgekey", "my.hpcbridgekey",
        # Beyond the API's list: each would move the outputs or undo the time limit.
        "initialdir", "transfer_output_remaps", "+periodicremove", "my.periodicremove",
        "+leavejobinqueue", "my.leavejobinqueue", "+jobbatchname", "my.jobbatchname",
    }
)


class SpecError(ValueError):
    """The spec breaks a rule; the message is one readable sentence for ``status.message``."""


def parse_target(raw: object) -> tuple[str, ClusterRef]:
    """Only the backend and cluster of a spec: enough to reach an attempt already submitted,
    even when a later edit broke another rule. Pure: no I/O."""
    spec = _mapping(raw, "spec")
    backend = spec.get("backend")
    if backend not in BACKENDS:
        raise SpecError(f"spec.backend must be one of {', '.join(BACKENDS)}, not {backend!r}.")
    return str(backend), _cluster(_mapping(spec.get("cluster"), "spec.cluster"))


def parse_spec(raw: object) -> Spec:
    """Validate ``raw`` (the BatchJob's ``spec``) into a ``Spec``. Pure: no I/O."""
    backend, cluster = parse_target(raw)
    spec = _mapping(raw, "spec")
    for other in BACKENDS:
        if other != backend and spec.get(other) is not None:
            raise SpecError(f"spec.{other} is set but spec.backend is {backend}; remove one.")
    resources = _resources(_mapping(spec.get("resources") or {}, "spec.resources"), backend)
    logs = _mapping(spec.get("logs") or {}, "spec.logs")
    return Spec(
        backend=backend,
        cluster=cluster,
        script=_script(spec.get("script")),
        resources=resources,
        slurm=_slurm(_mapping(spec.get("slurm") or {}, "spec.slurm")),
        htcondor=_htcondor(_mapping(spec.get("htcondor") or {}, "spec.htcondor")),
        logs_pod=_bool(logs.get("pod", True), "spec.logs.pod"),
        logs_follow=_bool(logs.get("follow", False), "spec.logs.follow"),
        backoff_limit=_int(spec.get("backoffLimit", 0), "spec.backoffLimit", minimum=0),
    )


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be an object.")
    return value


def _int(value: object, where: str, *, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where} must be a whole number, not {value!r}.")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise SpecError(f"{where} must be at least {minimum}{upper}, not {value}.")
    return value


def _optional_int(value: object, where: str, *, minimum: int) -> int | None:
    return None if value is None else _int(value, where, minimum=minimum)


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false, not {value!r}.")
    return value


def _str(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\n" in value:
        raise SpecError(f"{where} must be a non-empty single-line string.")
    return value


def _cluster(cluster: Mapping[str, Any]) -> ClusterRef:
    host = cluster.get("host")
    if not isinstance(host, str) or not host or any(c.isspace() for c in host):
        raise SpecError("spec.cluster.host must be the SSH host name of the login node.")
    secret_ref = _mapping(cluster.get("secretRef"), "spec.cluster.secretRef")
    secret_name = secret_ref.get("name")
    if not isinstance(secret_name, str) or not secret_name:
        raise SpecError("spec.cluster.secretRef.name must name a Secret in this namespace.")
    return ClusterRef(
        host=host,
        port=_int(cluster.get("port", 22), "spec.cluster.port", minimum=1, maximum=65535),
        secret_name=secret_name,
        insecure_skip_host_key_check=_bool(
            cluster.get("insecureSkipHostKeyCheck", False), "spec.cluster.insecureSkipHostKeyCheck"
        ),
    )


def _script(script: object) -> str:
    if not isinstance(script, str) or not script.startswith("#!"):
        raise SpecError('spec.script must be a batch script starting with "#!".')
    if len(script.encode()) > MAX_SCRIPT_BYTES:
        raise SpecError("spec.script is larger than 256 KiB; stage big inputs on the cluster.")
    return script


def _resources(raw: Mapping[str, Any], backend: object) -> Resources:
    if raw.get("nodes") is not None and backend != "slurm":
        raise SpecError("spec.resources.nodes applies to SLURM only; remove it for HTCondor.")
    time_limit = raw.get("timeLimit")
    memory = raw.get("memory")
    try:
        seconds = None if time_limit is None else units.parse_time_limit(str(time_limit))
    except ValueError as err:
        raise SpecError(f"spec.resources.timeLimit: {err}.") from err
    try:
        mib = None if memory is None else units.parse_memory_mib(memory)
    except ValueError as err:
        raise SpecError(f"spec.resources.memory: {err}.") from err
    return Resources(
        cpus=_optional_int(raw.get("cpus"), "spec.resources.cpus", minimum=1),
        memory_mib=mib,
        gpus=_optional_int(raw.get("gpus"), "spec.resources.gpus", minimum=0),
        time_limit_seconds=seconds,
        nodes=_optional_int(raw.get("nodes"), "spec.resources.nodes", minimum=1),
    )


def _slurm(raw: Mapping[str, Any]) -> SlurmOptions:
    array = _str(raw.get("array"), "spec.slurm.array")
    try:
        tasks = units.parse_array(array) if array else ()
    except ValueError as err:
        raise SpecError(f"spec.slurm.array: {err}.") from err
    extra = raw.get("extraArgs") or []
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise SpecError("spec.slurm.extraArgs must be a list of strings.")
    _check_extra_args(extra)
    return SlurmOptions(
        partition=_str(raw.get("partition"), "spec.slurm.partition"),
        account=_str(raw.get("account"), "spec.slurm.account"),
        qos=_str(raw.get("qos"), "spec.slurm.qos"),
        array=array,
        array_tasks=tasks,
        extra_args=tuple(extra),
    )


def reserved_slurm_option(arg: str) -> str | None:
    """The reserved sbatch option ``arg`` would set, if any (abbreviations included).

    >>> reserved_slurm_option("--out=/tmp/x"), reserved_slurm_option("-Jname")
    ('--output', '-J')
    >>> reserved_slurm_option("-vJx")
    '-J'
    >>> reserved_slurm_option("--constraint=haswell") is None
    True
    """
    if arg.startswith("--"):
        name = arg[2:].split("=", 1)[0]
        for reserved in RESERVED_SLURM_LONG:
            if name and reserved.startswith(name):
                return f"--{reserved}"
        return None
    if arg.startswith("-"):
        for letter in arg[1:]:
            if letter in RESERVED_SLURM_SHORT:
                return f"-{letter}"
            if letter not in SLURM_SHORT_FLAGS:
                return None
    return None


def _check_extra_args(args: list[str]) -> None:
    """Each element is one option with its value attached (``--name=value``, ``-pdebug``):
    a separate value or a bare ``--`` could make sbatch take a path as the batch script."""
    for arg in args:
        reserved = reserved_slurm_option(arg)
        if reserved:
            raise SpecError(
                f"spec.slurm.extraArgs sets {reserved}, which hpcbridge manages; remove it."
            )
        if not arg.startswith("-") or arg == "--":
            raise SpecError(
                f"spec.slurm.extraArgs has {arg!r}; write each option with its value in one "
                "element, like --constraint=haswell."
            )


def _htcondor(raw: Mapping[str, Any]) -> HTCondorOptions:
    queue = _int(raw.get("queue", 1), "spec.htcondor.queue", minimum=1, maximum=10000)
    options = _mapping(raw.get("submitOptions") or {}, "spec.htcondor.submitOptions")
    checked: list[tuple[str, str]] = []
    for key, value in sorted(options.items()):
        if not isinstance(value, str):
            raise SpecError(f"spec.htcondor.submitOptions[{key!r}] must be a string.")
        if "\n" in key or "\r" in key or "\n" in value or "\r" in value:
            first_line = (key.splitlines() or [""])[0]
            raise SpecError(
                f"spec.htcondor.submitOptions[{first_line!r}] contains a newline, "
                "which would start a new submit command."
            )
        if not _submit_key_ok(key):
            raise SpecError(
                f"spec.htcondor.submitOptions has key {key!r}; keys are submit commands like "
                "request_disk or +Attribute."
            )
        if key.lower() in RESERVED_HTCONDOR_KEYS:
            raise SpecError(
                f"spec.htcondor.submitOptions sets {key!r}, which hpcbridge manages; remove it."
            )
        checked.append((key, value))
    return HTCondorOptions(queue=queue, submit_options=tuple(checked))


def _submit_key_ok(key: str) -> bool:
    body = key[1:] if key.startswith("+") else key
    body = body[3:] if body.lower().startswith("my.") else body
    return bool(body) and all(c.isalnum() or c in "_." for c in body)
