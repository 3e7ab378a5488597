"""Apptainer and SingularityCE: an image pulled into a SIF file in the site's cache, run with
``exec`` or ``run``. Pure: no I/O.

SingularityCE shares Apptainer's command line; only its program and the prefix of the
variables it hands into the container differ (``SINGULARITYENV_`` for ``APPTAINERENV_``).

Neither can be installed on the test machines, so these command lines are checked against
the runtimes' documented behaviour (the user guides and man pages of Apptainer 1.2 to 1.4 and
SingularityCE 4.1), not run:

- ``pull --authfile FILE`` reads a Docker-style login file, for ``docker://`` and ``oras://``
  alike (Apptainer 1.2, SingularityCE 4.1); ``--disable-cache`` keeps the runtime's own cache
  (``~/.apptainer/cache``) from holding a second copy of the image in the home directory.
- ``run IMAGE ARGS`` runs the image's runscript, which for an OCI image is its entrypoint with
  ``ARGS`` in place of its Cmd; ``exec IMAGE CMD ARGS`` runs a command instead. Either stops
  reading its own flags at the image, so an argument may start with ``-``.
- The image's ENV applies by itself, and the host's environment passes in (unless the site's
  flags clean it, ``--cleanenv``), but a host variable does not override one the image sets:
  ``spec.env`` goes in through ``APPTAINERENV_NAME``, exported before the runtime runs.
- ``--bind SRC:DST[:ro]``, ``--pwd DIR``, and ``--nv`` for the node's NVIDIA GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hooks.core.values import shell_words
from hooks.core.values.image import Container, ImageConfig, Transport

PULL = """set --
[ -n "$auth" ] && set -- --authfile "$auth/auth.json"
{command} pull --disable-cache "$@" "$tmp" "$src"
"""
NOTE = ("Apptainer 1.2 or later (pull --authfile); from its documentation only: Apptainer "
        "cannot be installed on the test machines.")
SINGULARITY_NOTE = ("SingularityCE 4.1 or later (pull --authfile); from its documentation "
                    "only: SingularityCE cannot be installed on the test machines.")


@dataclass(frozen=True, slots=True)
class Apptainer:
    """Apptainer, or SingularityCE under its own ``command`` and ``env_prefix``."""

    command: str = "apptainer"
    env_prefix: str = "APPTAINERENV_"
    version_note: str = NOTE
    supports_read_only: bool = True
    makes_sif: bool = True

    def cached_name(self, digest: str) -> str:
        """A SIF file: ``sha256-<hex>.sif``."""
        return f"{shell_words.digest_name(digest)}.sif"

    def pulls(self, transport: Transport) -> bool:
        """OCI images (``docker://``) and SIF files stored as OCI artifacts (``oras://``)."""
        return transport in (Transport.DOCKER, Transport.ORAS)

    def file_image(self, path: str) -> str:
        """A SIF file, a SquashFS image or a sandbox directory runs from its path."""
        return path

    def pull_script(self) -> str:
        """``pull`` into ``$tmp``, with ``--authfile`` when there is a login."""
        return PULL.format(command=self.command)

    def run_words(self, *, image: str, container: Container, config: ImageConfig,
                  env_names: Sequence[str], gpus: int, script: bool) -> list[str]:
        """``run`` for the image's entrypoint, ``exec`` for a command or the script. The
        image's config and the environment need no words: the runtime applies the former,
        and ``env_lines`` hands in the latter."""
        argv = shell_words.program(container, script)
        words = [self.command, "run" if argv is None else "exec",
                 *shell_words.quoted(container.runtime_args), *self.gpu_flags(gpus),
                 "--bind", shell_words.ATTEMPT_BIND]
        for mount in container.mounts:
            words += ["--bind", shell_words.bind_word(mount, ":ro")]
        words += ["--pwd", shell_words.working_dir(container), self.file_image(image)]
        return [*words, *(shell_words.quoted(container.args) if argv is None else argv)]

    def env_lines(self, names: Sequence[str]) -> list[str]:
        """``export APPTAINERENV_NAME="$NAME"`` for each name: a prefixed variable overrides
        what the image sets. Prefixes (the scheduler's task variables) are left to the host's
        environment, which passes in."""
        return [f'export {self.env_prefix}{name}="${name}"' for name in shell_words.exact(names)]

    def gpu_flags(self, gpus: int) -> list[str]:
        """``--nv``: the host's NVIDIA driver libraries and devices."""
        return ["--nv"] if gpus > 0 else []


APPTAINER = Apptainer()
SINGULARITY = Apptainer("singularity", "SINGULARITYENV_", SINGULARITY_NOTE)
