"""The script an HTCondor pool's own container runtime runs inside the image. Pure: no I/O.

Where the pool's execute nodes run images themselves (``container_image``, see
``hooks.core.decide.images``), the job's executable is not a script that starts a runtime
but the program HTCondor starts inside the image, in the job's scratch directory, which is
``$d``: HTCondor's file transfer brings the inputs there and takes what the job writes back
to the attempt's directory. HTCondor passes the job's environment in (``spec.env`` through the
env file's reader, which runs inside the image too) and adds the GPUs it assigned (``--nv``),
so the script only goes to the working directory and runs what the BatchJob or the image says
to run: ``command`` with ``args``, the BatchJob's script, or the image's entrypoint with
``args`` in place of its Cmd, as a Pod's container runs. It needs a ``/bin/sh`` in the image.
"""

from __future__ import annotations

import shlex

from hooks.core.values import shell_words
from hooks.core.values.image import ImageConfig
from hooks.core.values.job import Spec

NOTHING = ("echo 'hpcbridge: the image names no entrypoint or command, and "
           "spec.container.command is not set' >&2; exit 127")


def render(spec: Spec, config: ImageConfig | None) -> str:
    """The program the pool's runtime runs inside ``spec.container``'s image, whose config is
    ``config`` (None when unknown: the BatchJob then says what to run)."""
    container = spec.container
    assert container is not None
    argv = shell_words.program(container, bool(spec.script))
    if argv is None:
        own = config or ImageConfig()
        argv = shell_words.quoted((*own.entrypoint, *(container.args or own.cmd)))
    lines = ["#!/bin/sh", f"# hpcbridge: {shlex.quote(container.image.text)} run by the pool",
             "d=$PWD"]
    if spec.script:
        lines.append(f'chmod u+x {shell_words.SCRIPT_WORD} || exit 1')
    if container.working_dir:
        lines.append(f"cd {shell_words.working_dir(container)} || exit 1")
    lines.append(" ".join(["exec", *argv]) if argv else NOTHING)
    return "\n".join(lines) + "\n"
