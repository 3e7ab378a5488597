"""The runtime contract: what a container runtime renders for the hooks. Pure: no I/O.

A runtime renders shell text, which the imperative shell runs on the cluster::

    login node    pull_script()        the pull of ``$src`` into ``$tmp`` in the site's cache
                                       (``hooks.schedulers.image_cache`` runs it)
    compute node  env_lines(names)     lines of the batch script before the runtime runs
                  run_words(...)       the words that run the cached image
                                       (``hooks.core.runtimes.wrapper`` writes both)

Every word is one POSIX sh word, built from the pieces the runtimes share
(``hooks.core.values.shell_words``). The values of ``spec.env`` never reach a word: a runtime
is told only the names, and takes each value from the job's own environment, where the
scheduler put it (``hooks.schedulers.files``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hooks.core.values.image import Container, ImageConfig, Transport


class Runtime(Protocol):
    """One container runtime, as the hooks drive it: one module each, one entry of
    ``hooks.core.runtimes.RUNTIMES``."""

    @property
    def command(self) -> str:
        """The program the batch script and the pull run (``apptainer``, ``podman``...)."""
        ...

    @property
    def supports_read_only(self) -> bool:
        """Whether a bind can be read-only; the site refuses a read-only mount otherwise."""
        ...

    @property
    def makes_sif(self) -> bool:
        """Whether the cache holds the image as a SIF file, which an HTCondor pool's own
        runtime can run (``container_image``) instead of the batch script running it."""
        ...

    @property
    def version_note(self) -> str:
        """Which versions the command lines are for, and what is known of them only from the
        runtime's documentation."""
        ...

    def cached_name(self, digest: str) -> str:
        """The name of the image of ``digest`` in the runtime's cache directory."""
        ...

    def pulls(self, transport: Transport) -> bool:
        """Whether the runtime pulls references of ``transport`` (an image file is never
        pulled)."""
        ...

    def file_image(self, path: str) -> str:
        """The image argument that runs the image file at ``path`` (literal text, or a shell
        word)."""
        ...

    def pull_script(self) -> str:
        """POSIX sh lines that pull ``$src`` (``$ref`` without its transport) into ``$tmp``,
        with the registry login in ``$auth`` when it is not empty (``auth.json``, ``username``
        and ``password``, mode 0600); their status is the pull's, the tool's own message on
        stderr when it fails."""
        ...

    def run_words(self, *, image: str, container: Container, config: ImageConfig,
                  env_names: Sequence[str], gpus: int, script: bool) -> list[str]:
        """The words that run ``container`` from ``image`` (a shell word) in the attempt's
        directory ``$d``: with ``env_names`` passed in from the job's environment (a name
        ending in ``*`` passes every variable it prefixes), ``gpus`` GPUs, and with
        ``script`` the BatchJob's script run inside the image instead of its entrypoint."""
        ...

    def env_lines(self, names: Sequence[str]) -> list[str]:
        """Lines of the batch script, before the runtime runs, that hand the variables
        ``names`` to the container (none when ``run_words`` passes them itself)."""
        ...

    def gpu_flags(self, gpus: int) -> list[str]:
        """The words that give the container the node's GPUs when the job asks for any."""
        ...
