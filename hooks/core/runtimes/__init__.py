"""The container runtimes a BatchJob's ``spec.container`` runs with, one module each, and the
batch script that runs the image (``wrapper``). Pure: no I/O.

A runtime renders shell text and knows nothing else (``base.Runtime``): the lines that pull an
image by digest into the site's cache on the login node, and the words that run it from there
on the compute node, with the BatchJob's command, mounts, environment and GPUs. The core
decides which runtime an attempt uses (``hooks.core.sites.containers``); the shell runs what it
renders (``hooks.schedulers.image_cache``, the scheduler's submission).

================  ==================================================================
``apptainer``     Apptainer, and SingularityCE under its own name: SIF files
``podman``        rootless Podman: OCI archives
``charliecloud``  Charliecloud's ``ch-run``: directories
================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Mapping

from hooks.core.runtimes.apptainer import APPTAINER, SINGULARITY
from hooks.core.runtimes.base import Runtime
from hooks.core.runtimes.charliecloud import CHARLIECLOUD
from hooks.core.runtimes.podman import PODMAN

RUNTIMES: Mapping[str, Runtime] = {
    "apptainer": APPTAINER,
    "singularity": SINGULARITY,
    "podman": PODMAN,
    "charliecloud": CHARLIECLOUD,
}
"""Every runtime by the name ``spec.container.runtime`` and a BatchCluster's
``spec.containers.runtimes`` give it."""
