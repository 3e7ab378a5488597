"""Charliecloud: an image pulled with ``ch-image`` and converted into a directory in the site's
cache, run with ``ch-run``. Pure: no I/O.

Checked for real with Charliecloud 0.31 as an unprivileged user (the HTCondor pool has 0.38,
whose manual documents the same flags):

- ``ch-image --no-cache pull REF`` into a storage directory of the pull's own
  (``CH_IMAGE_STORAGE``, which ``ch-image`` creates itself, in a fresh temporary directory),
  then ``ch-convert -i ch-image -o dir``: the build cache stays off (it needs a git
  identity), no pull waits on the lock of the user's storage, and nothing of it is left
  behind.
  ``ch-image`` needs ``$USER``; a login reaches it as ``CH_IMAGE_USERNAME`` and
  ``CH_IMAGE_PASSWORD`` in its environment alone, with ``--auth``.
- ``ch-run`` applies nothing of the image's config: the entrypoint and Cmd become the command
  after ``--``, and the image's ENV ``--set-env=NAME='VALUE'`` options (after
  ``--env-no-expand``, so that a ``$`` stays a ``$``; ``ch-run`` strips one pair of single
  quotes around a value) for each variable the job does not pass itself. Its own environment
  passes in whole, ``spec.env`` and the scheduler's variables with it.
- A bind's destination must exist in a read-only image, so the image is mounted read-write
  (``--write``) for the attempt's directory and the mounts to get their mount points, unless
  the site's flags choose ``--write-fake`` (0.38: a tmpfs over the image, which stays as it
  is). A bind is always read-write: no version has a read-only bind.
- There is no GPU flag: the site injects the host's NVIDIA libraries into the images with
  ``ch-fromhost --nvidia``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hooks.core.values import shell_words
from hooks.core.values.image import Container, ImageConfig, Transport

PULL = """USER=${USER:-$(id -un)}; export USER
own=$(mktemp -d "${TMPDIR:-/var/tmp}/hpcbridge-ch.XXXXXX") || exit 1
CH_IMAGE_STORAGE=$own/storage; export CH_IMAGE_STORAGE
if [ -z "$auth" ]; then
  ch-image --no-cache pull "$ref"
else
  CH_IMAGE_USERNAME=$(cat -- "$auth/username") CH_IMAGE_PASSWORD=$(cat -- "$auth/password") \\
    ch-image --no-cache pull --auth "$ref"
fi && ch-convert -i ch-image -o dir "$ref" "$tmp"
rc=$?
rm -rf -- "$own"
exit "$rc"
"""
WRITABLE = frozenset({"-w", "--write", "-W", "--write-fake"})
"""Flags by which the site chooses how the image is made writable (``--write-fake=SIZE``
too)."""
NOTE = ("Charliecloud 0.31 (tried for real) and 0.38 (its manual): --set-env=NAME=VALUE, "
        "--env-no-expand, --write; --write-fake from the site's flags needs 0.38 and "
        "unprivileged overlayfs.")


@dataclass(frozen=True, slots=True)
class Charliecloud:
    """Charliecloud's ``ch-run``, images as directories."""

    command: str = "ch-run"
    version_note: str = NOTE
    supports_read_only: bool = False
    makes_sif: bool = False

    def cached_name(self, digest: str) -> str:
        """A directory: ``sha256-<hex>``."""
        return shell_words.digest_name(digest)

    def pulls(self, transport: Transport) -> bool:
        """OCI images (``docker://``) only."""
        return transport is Transport.DOCKER

    def file_image(self, path: str) -> str:
        """A directory or a SquashFS archive runs from its path."""
        return path

    def pull_script(self) -> str:
        """``ch-image pull`` then ``ch-convert`` into the directory ``$tmp``."""
        return PULL

    def run_words(self, *, image: str, container: Container, config: ImageConfig,
                  env_names: Sequence[str], gpus: int, script: bool) -> list[str]:
        """``ch-run`` of the directory, the image's config rendered into options and the
        command."""
        site = container.runtime_args
        words = [self.command, *shell_words.quoted(site), *_writable(site), *self.gpu_flags(gpus),
                 "-b", shell_words.ATTEMPT_BIND]
        for mount in container.mounts:
            words += ["-b", shell_words.bind_word(mount)]
        words += ["--cd", shell_words.working_dir(container), *_image_env(config, env_names)]
        argv = shell_words.program(container, script)
        if argv is None:
            argv = shell_words.quoted((*config.entrypoint, *(container.args or config.cmd)))
        return [*words, self.file_image(image), "--", *argv]

    def env_lines(self, names: Sequence[str]) -> list[str]:
        """None: ``ch-run`` passes the job's environment in whole."""
        return []

    def gpu_flags(self, gpus: int) -> list[str]:
        """None: the site's images hold the host's libraries (``ch-fromhost --nvidia``)."""
        return []


def _writable(site: Sequence[str]) -> list[str]:
    """``--write``, unless the site's flags say how the image is written."""
    chosen = any(flag in WRITABLE or flag.startswith("--write-fake=") for flag in site)
    return [] if chosen else ["--write"]


def _image_env(config: ImageConfig, env_names: Sequence[str]) -> list[str]:
    """The image's ENV as ``--set-env`` options, but for what the job passes itself."""
    kept = [(name, value) for name, value in config.env if not shell_words.passes(name, env_names)]
    if not kept:
        return []
    return ["--env-no-expand",
            *(shlex.quote(f"--set-env={name}='{value}'") for name, value in kept)]


CHARLIECLOUD = Charliecloud()
