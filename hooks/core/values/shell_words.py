"""The words of a container's command line, as every runtime writes them
(``hooks.core.runtimes``). Pure: no I/O.

Each is one POSIX sh word: literal text goes through ``shlex.quote``, and the attempt's
directory is the shell variable ``$d``, always inside double quotes (``"$d"``), so that a path,
an argument or a site flag reaches the runtime as exactly the text it is, whatever spaces,
quotes, ``;``, ``$(...)`` or leading ``-`` it holds. They live among the values, below the
runtimes, because the package that holds ``RUNTIMES`` may not be imported back by its own
modules.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence

from hooks.core.values.image import Container, Mount

SCRIPT = ".hpcbridge-script"
"""The BatchJob's ``spec.script`` in the attempt's directory, run inside the image (the same
name as ``hooks.core.runtimes.wrapper.SCRIPT``, which writes it)."""
ATTEMPT = '"$d"'
"""The attempt's directory, as a word."""
SCRIPT_WORD = f'"$d/{SCRIPT}"'
ATTEMPT_BIND = '"$d:$d"'
"""The attempt's directory bound at its own path, as a word."""
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
UNBINDABLE = frozenset(":,")
"""What a bind's path may not hold: every runtime splits its bind on ``:``, Apptainer its list
of binds on ``,``."""


def digest_name(digest: str) -> str:
    """``digest`` as a file name.

    >>> digest_name("sha256:" + "ab" * 32) == "sha256-" + "ab" * 32
    True
    """
    algorithm, _, hexdigits = digest.partition(":")
    return f"{algorithm}-{hexdigits}"


def quoted(words: Iterable[str]) -> list[str]:
    """``words`` as literal shell words."""
    return [shlex.quote(word) for word in words]


def bindable(path: str) -> bool:
    """Whether every runtime binds ``path`` as it is written (no ``:`` nor ``,``).

    >>> bindable("/scratch/lab"), bindable("/scratch/a:b"), bindable("/scratch/a,b")
    (True, False, False)
    """
    return not UNBINDABLE.intersection(path)


def bind_word(mount: Mount, read_only: str = "") -> str:
    """``mount`` as ``host:target``, with ``read_only`` appended to a read-only one; a path a
    bind cannot hold is a ``ValueError`` (the site checks ``bindable`` first)."""
    for path in (mount.host_path, mount.mount_path):
        if not bindable(path):
            raise ValueError(f"{path!r} cannot be bound: a bind's path may not hold ':' or ','")
    suffix = read_only if mount.read_only else ""
    return shlex.quote(f"{mount.host_path}:{mount.mount_path}{suffix}")


def working_dir(container: Container) -> str:
    """The container's working directory as a word: its own, or the attempt's directory."""
    return shlex.quote(container.working_dir) if container.working_dir else ATTEMPT


def program(container: Container, script: bool) -> list[str] | None:
    """The words the BatchJob says to run, or None when the image's entrypoint runs.

    With ``script``, the BatchJob's script runs with ``args``, after ``command`` when that is
    set too (the command then runs the script: ``["bash", "-x"]``); without, ``command`` runs
    with ``args``.
    """
    if script:
        return [*quoted(container.command or ()), SCRIPT_WORD, *quoted(container.args)]
    if container.command is not None:
        return quoted((*container.command, *container.args))
    return None


def passes(name: str, names: Sequence[str]) -> bool:
    """Whether ``names`` pass the variable ``name``: by name, or by a prefix ending in ``*``.

    >>> passes("SLURM_JOB_ID", ["A", "SLURM_*"]), passes("B", ["A", "SLURM_*"])
    (True, False)
    """
    return any(name == each or (each.endswith("*") and name.startswith(each[:-1]))
               for each in names)


def exact(names: Sequence[str]) -> list[str]:
    """The names of ``names`` that are names, not prefixes ending in ``*``; a name that is
    neither is a ``ValueError`` (``spec.env`` names are identifiers)."""
    kept = [name for name in names if not name.endswith("*")]
    for name in kept:
        if not IDENTIFIER.fullmatch(name):
            raise ValueError(f"{name!r} is not a variable name")
    return kept
