"""The files an attempt's directory gets besides the script: the env file and the input files.
Pure: no I/O.

``spec.env`` reaches the job through ``ENV_FILE`` (mode 0600 like every file the guard writes,
removed by finalize), never through a command line, a submit description or a job ad: SLURM
reads it with ``sbatch --export-file`` (``environment_file``), HTCondor's jobs run ``WRAPPER``,
which reads it (``shell_environment``) and then runs the script.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hooks.core.values.job import JobRequest

TASK_OUTPUT = re.compile(r"[0-9].*\.(out|err)")
"""A task's stdout and stderr, ``<task id>.out`` and ``.err`` at the top of the attempt's
directory: where every scheduler here has its tasks write, and where the log Pod reads them."""
ENV_FILE = "hpcbridge-env"
WRAPPER = "hpcbridge-run"
WRAPPER_PROGRAM = f"""#!/bin/sh
set -a
. ./{ENV_FILE} || exit 1
set +a
chmod u+x ./script 2>/dev/null
exec ./script "$@"
"""
"""The executable of an HTCondor job with ``spec.env``: the variables, then the script."""
QUOTE, ESCAPED_QUOTE = "'", "'\\''"


def shell_environment(environment: Sequence[tuple[str, str]]) -> bytes:
    """``NAME='value'`` lines for ``.`` in a POSIX shell (names are identifiers, values have
    no NUL).

    >>> print(shell_environment([("A", "it's")]).decode(), end="")
    A='it'\\''s'
    """
    return "".join(f"{name}='{value.replace(QUOTE, ESCAPED_QUOTE)}'\n"
                   for name, value in environment).encode()


def environment_file(environment: Sequence[tuple[str, str]]) -> bytes:
    """``NAME=value`` entries separated by NUL, as ``sbatch --export-file`` reads them."""
    return b"".join(f"{name}={value}".encode() + b"\0" for name, value in environment)


def input_files(job: JobRequest) -> list[tuple[str, bytes]]:
    """The attempt's input files, for the guard's ``files``."""
    return [(item.path, item.content) for item in job.inputs]


def input_tops(job: JobRequest) -> list[str]:
    """The files and directories the input files (and the staged inputs) make at the top of
    the attempt's directory, in order."""
    return list(dict.fromkeys([*(item.path.partition("/")[0] for item in job.inputs),
                               *job.staged]))
