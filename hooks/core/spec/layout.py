"""Where an attempt goes and what it may write: the route to a login node (``spec.cluster``,
kept again in ``status.cluster``), the work directory, and the names of files in an attempt's
directory.

The attempt directory holds the job's input files beside the files the hooks and the
scheduler write themselves: ``reserved_file`` keeps an input from taking one's place. The core
reserves what every scheduler shares (the task outputs, the ``ended`` marker, names starting
with ``.`` or ``hpcbridge``); each scheduler declares the others it writes
(``SchedulerRules.writes_file``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from hooks.core.values.fields import SpecError, flag, mapping, whole_number
from hooks.core.values.job import DEFAULT_WORK_DIR, ClusterRef, Hop
from hooks.core.values.text import has_control, shown

MAX_JUMPS = 3
MAX_PATH = 1024
FILE_NAME = re.compile(r"[-._a-zA-Z0-9+@=]+")
"""The characters of a component of an input file's path: a name every shell, submit
description and file transfer list takes as it is (no space, comma, quote or ``$``)."""
DNS_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""The form of a Kubernetes object's name (a BatchJob's, a Secret's)."""
RESOLVE = 'case $1 in /*) d=$1 ;; *) d=$HOME/$1 ;; esac'
"""The shell's reading of a work directory (``work_dir``): ``$1`` absolute, or relative to the
login user's home, as ``d``; every remote program that takes an attempt's directory starts
with it."""
SHARED_FILES = frozenset({"ended", "ended.tmp"})
"""The files every scheduler's attempt directory has: the marker the log Pod waits for."""
SHARED_PREFIXES = (".", "hpcbridge")
"""Names any scheduler may give its own files (the env file, the wrapper, a guard)."""


def cluster_ref(raw: object, where: str) -> ClusterRef:
    """The route to a login node as ``spec.cluster`` writes it (and ``status.cluster`` keeps
    it)."""
    cluster = mapping(raw, where)
    host = host_name(cluster.get("host"), f"{where}.host")
    secret_name = _secret_name(cluster.get("secretRef"), f"{where}.secretRef")
    if secret_name is None:
        raise SpecError(f"{where}.secretRef.name must name a Secret in this namespace.")
    jump = cluster.get("jump") or []
    if not isinstance(jump, list) or len(jump) > MAX_JUMPS:
        raise SpecError(f"{where}.jump must be a list of at most {MAX_JUMPS} jump hosts.")
    return ClusterRef(
        host=host,
        port=port_number(cluster.get("port", 22), f"{where}.port"),
        secret_name=secret_name,
        insecure_skip_host_key_check=flag(
            cluster.get("insecureSkipHostKeyCheck", False), f"{where}.insecureSkipHostKeyCheck"
        ),
        jump=tuple(_hop(mapping(raw, f"{where}.jump[{i}]"), f"{where}.jump[{i}]",
                        secret_name) for i, raw in enumerate(jump)),
        work_dir=work_dir(cluster.get("workDir"), f"{where}.workDir"),
    )


def _hop(raw: Mapping[str, Any], where: str, cluster_secret: str) -> Hop:
    ref = raw.get("secretRef")
    secret_name = None if ref is None else _secret_name(ref, f"{where}.secretRef")
    if ref is not None and secret_name is None:
        raise SpecError(f"{where}.secretRef.name must name a Secret in this namespace.")
    return Hop(
        host=host_name(raw.get("host"), f"{where}.host"),
        port=port_number(raw.get("port", 22), f"{where}.port"),
        secret_name=secret_name or cluster_secret,
        insecure_skip_host_key_check=flag(raw.get("insecureSkipHostKeyCheck", False),
                                          f"{where}.insecureSkipHostKeyCheck"),
    )


def valid_host(host: object) -> bool:
    """Whether ``host`` is a plausible SSH host name (or address)."""
    return (isinstance(host, str) and 0 < len(host) <= 253 and not has_control(host)
            and not any(c.isspace() or c in ",/@" for c in host)
            and all(0 < len(label) < 64 for label in host.removesuffix(".").split(".")))


def host_name(host: object, where: str) -> str:
    if not valid_host(host):
        raise SpecError(f"{where} must be an SSH host name.")
    assert isinstance(host, str)
    return host


def port_number(value: object, where: str) -> int:
    return whole_number(value, where, minimum=1, maximum=65535)


def _secret_name(ref: object, where: str) -> str | None:
    name = mapping(ref, where).get("name")
    return name if isinstance(name, str) and DNS_SUBDOMAIN.fullmatch(name) else None


def work_dir(value: object, where: str) -> str:
    """``spec.cluster.workDir``: absolute, or relative to the home directory (``~/`` allowed),
    without ``..`` or empty components; the default ``~/.hpcbridge``."""
    if value is None:
        return DEFAULT_WORK_DIR
    if not isinstance(value, str) or value in ("~", "~/", "/") or len(value) > MAX_PATH:
        raise SpecError(f"{where} must be a directory path of at most {MAX_PATH} characters "
                        "other than / and ~.")
    path = value.removeprefix("~/").rstrip("/") if value != "/" else value
    rooted = value.startswith("/")  # "~//x" is an empty component under ~/, not /x
    parts = (path[1:] if rooted else path).split("/")
    if (has_control(path) or any(part in ("", ".", "..") or part.startswith("~")
                                 for part in parts)
            or any(c in path for c in "$`\\")):
        raise SpecError(f"{where} must be an absolute path or one relative to the home "
                        "directory (~/), without '.', '..', empty or '~user' components, "
                        "control characters, '$', '`' or '\\' (it is taken as it is, never "
                        "expanded).")
    return path


def relative_path(value: object, where: str) -> str:
    """A path inside the job's directory: relative, its components names of letters, digits
    and ``-._+@=``, none of them '.' or '..'."""
    if (not isinstance(value, str) or not value or len(value) > MAX_PATH
            or any(part in (".", "..") or not FILE_NAME.fullmatch(part)
                   for part in value.split("/"))):
        raise SpecError(f"{where} must be a relative path inside the job's directory: "
                        "components of letters, digits and -._+@=, none of them '.' or "
                        f"'..', not {shown(value)}.")
    return value


def reserved_file(path: str, writes_file: Callable[[str], bool]) -> bool:
    """Whether a file at ``path`` (relative to the attempt's directory) would take the place
    of one the hooks or the scheduler write: the ``ended`` marker, a name every scheduler may
    use, or one ``writes_file`` (the scheduler's: its own files and its tasks' output) claims.

    >>> reserved_file("data/x.csv", lambda name: name == "script")
    False
    >>> [reserved_file(p, lambda name: name == "script") for p in ("script/x", "ended", ".a")]
    [True, True, True]
    """
    top = path.partition("/")[0]
    return top in SHARED_FILES or top.startswith(SHARED_PREFIXES) or writes_file(top)
