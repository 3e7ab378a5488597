"""Podman, rootless: an image pulled on the login node and saved into the site's cache as an
OCI archive, run from the archive on the compute node. Pure: no I/O.

Checked for real with Podman 4.3.1 as an unprivileged user without a login session
(``XDG_RUNTIME_DIR`` unset, as in a batch job):

- ``pull --quiet [--authfile FILE] docker://REF`` then ``save --format oci-archive`` writes the
  archive; the user's own storage keeps no copy unless it had one before.
- ``run oci-archive:PATH`` copies the archive into the user's storage on the node and runs it
  (``--quiet``: without the copy's progress on stderr); ``--rm`` removes the container, and
  ``--log-driver=none`` keeps the job's output out of the storage (it still reaches the
  scheduler's files): a big output is not written twice.
- The image's ENV, entrypoint and Cmd apply by themselves; arguments after the image replace
  its Cmd; ``--entrypoint`` (a JSON array, or one path) replaces the entrypoint and drops the
  Cmd. Podman stops reading its own flags at the image, so an argument may start with ``-``.
- ``--env NAME`` takes the value from the job's environment and overrides the image's;
  ``--env 'SLURM_*'`` passes every variable of the prefix.
- ``-v SRC:DST[:ro]`` and ``-w DIR``; the container's root is the user (its user namespace
  maps root to the user's uid), so files it writes into the attempt's directory are the
  user's. ``--device nvidia.com/gpu=all`` asks for the GPUs by CDI (the site generates the
  spec with ``nvidia-ctk cdi generate``; without it Podman fails with "unresolvable CDI
  devices").

What the host itself needs (the OCI runtime, the cgroup manager, the network, SELinux
labels) belongs in the site's ``containers.conf`` or its runtime flags: on Debian 12 the test
clusters set ``runtime = "runc"``, ``cgroup_manager = "cgroupfs"`` and ``netns = "host"``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hooks.core.values import shell_words
from hooks.core.values.image import Container, ImageConfig, Transport

PULL = """set --
[ -n "$auth" ] && set -- --authfile "$auth/auth.json"
had=; podman image exists "$ref" && had=1
podman pull --quiet "$@" "$src" > /dev/null || exit 1
podman save --quiet --format oci-archive -o "$tmp" "$ref" || exit 1
[ -n "$had" ] || podman rmi "$ref" > /dev/null 2>&1
exit 0
"""
FLAGS = ("--rm", "--quiet", "--log-driver=none")
NOTE = "Podman 4.3.1 (tried for real); CDI devices need Podman 4.1 or later."


@dataclass(frozen=True, slots=True)
class Podman:
    """Rootless Podman."""

    command: str = "podman"
    version_note: str = NOTE
    supports_read_only: bool = True
    makes_sif: bool = False

    def cached_name(self, digest: str) -> str:
        """An OCI archive: ``sha256-<hex>.tar``."""
        return f"{shell_words.digest_name(digest)}.tar"

    def pulls(self, transport: Transport) -> bool:
        """OCI images (``docker://``) only."""
        return transport is Transport.DOCKER

    def file_image(self, path: str) -> str:
        """An image file is an OCI archive: ``oci-archive:PATH``."""
        return f"oci-archive:{path}"

    def pull_script(self) -> str:
        """``pull`` then ``save`` into ``$tmp``, with ``--authfile`` when there is a login."""
        return PULL

    def run_words(self, *, image: str, container: Container, config: ImageConfig,
                  env_names: Sequence[str], gpus: int, script: bool) -> list[str]:
        """``run`` of the archive; the image's config needs no words (Podman applies it)."""
        words = [self.command, "run", *shell_words.quoted(container.runtime_args), *FLAGS,
                 *self.gpu_flags(gpus), "-v", shell_words.ATTEMPT_BIND]
        for mount in container.mounts:
            words += ["-v", shell_words.bind_word(mount, ":ro")]
        words += ["-w", shell_words.working_dir(container)]
        for name in env_names:
            words += ["--env", shlex.quote(name)]
        entrypoint, after = _entrypoint(container, script)
        return [*words, *entrypoint, self.file_image(image), *after]

    def env_lines(self, names: Sequence[str]) -> list[str]:
        """None: ``--env NAME`` passes each variable from the job's environment."""
        return []

    def gpu_flags(self, gpus: int) -> list[str]:
        """Every NVIDIA GPU the job may see, by CDI."""
        return ["--device", "nvidia.com/gpu=all"] if gpus > 0 else []


def _entrypoint(container: Container, script: bool) -> tuple[list[str], list[str]]:
    """The ``--entrypoint`` words and the words after the image: the command as a JSON array
    (then the script, if any, and the arguments), or the script's path alone (a path, not
    JSON), or nothing (the image's entrypoint, the arguments in place of its Cmd)."""
    args = shell_words.quoted(container.args)
    if container.command is not None:
        command = shlex.quote(json.dumps(list(container.command)))
        return ["--entrypoint", command], [*([shell_words.SCRIPT_WORD] if script else []), *args]
    if script:
        return ["--entrypoint", shell_words.SCRIPT_WORD], args
    return [], args


PODMAN = Podman()
