"""The batch script of an attempt with ``spec.container``: it runs the cached image with the
site's runtime, from the attempt's directory. Pure: no I/O.

The scheduler submits this script as it would the BatchJob's own (``sbatch``, or HTCondor's
executable), so nothing of a scheduler changes: its output and exit status are the
container's, array tasks and procs each run the same image, and a runtime missing on the
compute node fails the job with the runtime's own message, never a silent success. The
BatchJob's ``spec.script``, when it has one, travels as the file ``SCRIPT`` and runs inside the
image (its shebang read there); its leading comment block, where ``#SBATCH`` directives live,
is kept at the top of this script, where the scheduler reads them. The attempt's directory is
``$d``, the job's working directory when it starts (the attempt's directory, or HTCondor's
scratch copy of it). A job of more than one node runs one container per task under the
scheduler's parallel launcher (SLURM's ``srun``): the hybrid model of MPI with containers.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from hooks.core.runtimes import RUNTIMES
from hooks.core.values.image import ImageConfig
from hooks.core.values.job import Spec

SCRIPT = ".hpcbridge-script"
"""The BatchJob's own script in the attempt's directory, run inside the image."""
LOGIN = (
    ': "${USER:=$(id -un)}" "${HOME:=$(getent passwd "$USER" | cut -d: -f6)}" '
    '"${PATH:=/usr/local/bin:/usr/bin:/bin}"',
    "export USER HOME PATH",
)
"""The login's variables, which the runtimes need and an HTCondor job is not given."""
TASK_VARIABLES = ("SLURM_*", "_CONDOR_*", "HPCBRIDGE_*")
"""The job's variables a container sees besides ``spec.env``: the scheduler's task ids."""


def render(spec: Spec, image: str, config: ImageConfig | None, env_names: Sequence[str],
           launcher: Sequence[str] = ()) -> str:
    """The script that runs ``spec.container`` from ``image`` (its path in the cache, or the
    image file), with ``env_names`` passed in and ``launcher`` before it on more than one
    node."""
    container = spec.container
    assert container is not None
    runtime = RUNTIMES[container.runtime]
    words = runtime.run_words(
        image=shlex.quote(image), container=container, config=config or ImageConfig(),
        env_names=(*env_names, *TASK_VARIABLES), gpus=spec.resources.gpus or 0,
        script=bool(spec.script))
    several = (spec.resources.nodes or 1) > 1 and launcher
    lines = ["#!/bin/sh", *directives(spec.script),
             f"# hpcbridge: {shlex.quote(container.image.text)} with {container.runtime}",
             'd=$PWD', *LOGIN]
    if spec.script:
        lines.append(f'chmod u+x "$d/{SCRIPT}" || exit 1')
    lines += runtime.env_lines(tuple(env_names))
    lines.append(" ".join(["exec", *(map(shlex.quote, launcher) if several else ()), *words]))
    return "\n".join(lines) + "\n"


def directives(script: str) -> list[str]:
    """The comment block at the top of ``script``, after its shebang: where a scheduler reads
    its directives (``#SBATCH``) before the first command.

    >>> directives("#!/bin/bash\\n#SBATCH -p debug\\n# a note\\n\\necho hi\\n#SBATCH -N 2\\n")
    ['#SBATCH -p debug', '# a note']
    """
    kept = []
    for line in script.splitlines()[1:]:
        if not line.startswith("#"):
            break
        kept.append(line)
    return kept
