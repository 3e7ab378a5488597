"""The image of an attempt with ``spec.container``, before it is submitted. Pure: no I/O.

The registry is asked once per attempt which digest the reference names (``ResolveImage``;
not for a reference pinned by digest, an image file, or ``imagePullPolicy: Never``), and the
digest goes into ``status.image`` at once. The login node then finds that digest in the site's
cache or pulls it there, in the background, once however many attempts ask
(``PrepareImage``); the attempt waits in ``Pending``/``PullingImage`` meanwhile. A pull or a
resolution that fails is ``ImagePullBackOff`` with the registry's or the runtime's word, tried
again after a back-off that doubles up to five minutes, as a kubelet does; ``Never`` with the
image not in the cache ends the attempt unsent (``ErrImageNeverPull``). With
``IfNotPresent`` a registry that cannot be reached (not one that refuses) is no failure when
the cache holds what the reference named last time. Once the image is in the cache, the
attempt is submitted with a script that runs it (``hooks.core.runtimes.wrapper``).

On a scheduler that runs images itself (HTCondor's ``container_image``) the scheduler is
asked, once the image is ready, whether its execute nodes advertise it (``ProbeContainers``):
a SIF file in the cache then runs with the pool's own runtime, in a container universe job
whose executable runs inside the image (``hooks.core.runtimes.pool``), when the job needs
nothing that only the script can give (``mounts``, the site's runtime flags). A BatchCluster
that lists no runtime of its own gets its pool's: the registry is asked for the digest, and
the execute node pulls ``docker://...@digest`` itself; a pool that advertises no such runtime
ends the attempt unsent, ``InvalidSpec`` naming the BatchCluster.
"""

from __future__ import annotations

from dataclasses import replace

from hooks.core.decide.effects import (
    Effects,
    PrepareImage,
    ProbeContainers,
    ResolveImage,
    Trouble,
)
from hooks.core.decide.rounds import Round
from hooks.core.runtimes import RUNTIMES, pool, wrapper
from hooks.core.sites.pull_secrets import PullSecretError, pull_credentials
from hooks.core.status import unsent
from hooks.core.status.record import Status
from hooks.core.values.image import (
    SUBMITTABLE,
    Container,
    ImageConfig,
    ImagePull,
    ImageRecord,
    Prepared,
    PreparedImage,
    PullPolicy,
    ResolvedImage,
    Transport,
    config_bytes,
    pull_backoff,
)
from hooks.core.values.job import InputFile, JobRequest, job_root
from hooks.core.values.reasons import Reason
from hooks.core.wire import response

Gated = tuple[JobRequest, ImageRecord | None] | Status
UNREACHABLE = Reason.CLUSTER_UNREACHABLE
"""A resolution's trouble when the registry could not be asked (``ResolveImage``): with
``IfNotPresent`` the cache's record of the reference stands in for its answer."""
BARE = "sha256:" + "0" * 64
"""A digest to learn each runtime's cache name from: what it adds to ``sha256-<hex>``."""


def gate(at: Round, job: JobRequest) -> Effects[Gated]:
    """The job to submit, running its image from the cache, with the image's record; or the
    status that waits for the image, or ends the attempt without it."""
    container = job.spec.container
    if container is None:
        return job, None
    record = _record(at, container)
    if record.pull_failures and _backing_off(at, record):
        return _waiting(at, record, Reason.IMAGE_PULL_BACKOFF, at.prev.message)
    if container.runtime == at.where.backend:
        return (yield from _pooled(at, job, container, record))
    if container.image.transport is Transport.FILE:
        return _ready(job, record, PreparedImage(Prepared.READY, path=container.image.path),
                      _launcher(at))
    credentials = _credentials(at, container)
    if isinstance(credentials, Trouble):
        return replace(at.unreachable(credentials), image=record)
    resolved: ResolvedImage | Trouble | None = None
    if not record.digest and container.pull_policy is not PullPolicy.NEVER:
        resolved = yield at.effect(ResolveImage(container.image, credentials,
                                                container.allowed_registries))
        if isinstance(resolved, Trouble) and (container.pull_policy is PullPolicy.ALWAYS
                                              or resolved.reason is not UNREACHABLE):
            return _failed(at, record, resolved)
    if isinstance(resolved, ResolvedImage):
        record = replace(record, digest=resolved.digest)
    pull = _pull(job, container, record, resolved, credentials)
    prepared = yield at.effect(PrepareImage(pull))
    if isinstance(prepared, Trouble):
        return replace(at.unreachable(prepared), image=record)
    if isinstance(resolved, Trouble) and prepared.state is not Prepared.READY:
        return _failed(at, record, resolved)
    if prepared.state is Prepared.READY and _pool_may_run(at, job, prepared):
        support = yield at.effect(ProbeContainers())
        if isinstance(support, Trouble):
            return replace(at.unreachable(support), image=record)
        if support.sif:
            return _in_pool(job, replace(record, digest=prepared.digest or record.digest,
                                         pull_failures=0, last_failure=""),
                            prepared.path, prepared.config)
    return _after(at, job, record, prepared)


def _pool_may_run(at: Round, job: JobRequest, prepared: PreparedImage) -> bool:
    """Whether the scheduler's own runtime could run the cached image as the script would:
    a SIF file at a path a submit description holds as it is, known to run (``command``, a
    script, or the image's config), with no mounts or site flags, which only the script
    passes."""
    container = job.spec.container
    assert container is not None
    return (at.call.rules[at.where.backend].own_containers
            and container.image.transport is not Transport.FILE
            and RUNTIMES[container.runtime].makes_sif
            and not container.mounts and not container.runtime_args
            and prepared.path.startswith("/") and SUBMITTABLE.fullmatch(prepared.path) is not None
            and (prepared.config is not None or container.command is not None
                 or bool(job.spec.script)))


def _pooled(at: Round, job: JobRequest, container: Container,
            record: ImageRecord) -> Effects[Gated]:
    """The image run by the pool's own runtime on a BatchCluster that lists none: asked of
    the registry (for its digest and config), then pulled by the execute node."""
    support = yield at.effect(ProbeContainers())
    if isinstance(support, Trouble):
        return replace(at.unreachable(support), image=record)
    if not support.docker:
        site = at.where.cluster.site
        ended = unsent.refused(at.prev, at.plan, backend=at.where.backend,
                               cluster=at.where.cluster, message=(
                                   f"spec.container cannot run on BatchCluster {site}: it lists "
                                   "no container runtime (spec.containers), and no execute node "
                                   "of its pool advertises one that pulls docker:// images "
                                   "(HasContainer, HasDockerURL); ask its platform team."))
        return replace(ended, image=record)
    resolved = yield at.effect(ResolveImage(container.image, None, ()))
    if isinstance(resolved, Trouble):
        return _failed(at, record, resolved)
    record = replace(record, digest=resolved.digest, pull_failures=0, last_failure="")
    image = f"{Transport.DOCKER}://{container.image.pinned(resolved.digest)}"
    if not SUBMITTABLE.fullmatch(image):
        ended = unsent.refused(at.prev, at.plan, backend=at.where.backend,
                               cluster=at.where.cluster, message=(
                                   f"spec.container.image {container.image.text} cannot be "
                                   "named in a job description as it is."))
        return replace(ended, image=record)
    return _in_pool(job, record, image, resolved.config)


def _in_pool(job: JobRequest, record: ImageRecord, image: str,
             config: ImageConfig | None) -> tuple[JobRequest, ImageRecord]:
    """The job whose image the scheduler runs itself: ``image`` for ``container_image``, and
    the program it runs inside, with the BatchJob's own script, if any, beside it."""
    script = pool.render(job.spec, config)
    inputs = job.inputs
    if job.spec.script:
        inputs = (*inputs, InputFile(wrapper.SCRIPT, job.spec.script.encode()))
    return replace(job, spec=replace(job.spec, script=script), inputs=inputs,
                   pool_image=image), record


def _credentials(at: Round, container: Container) -> tuple[str, str] | Trouble | None:
    """The login for the image's registry from ``imagePullSecrets``, or why there is none."""
    missing = [name for name in container.pull_secrets if name not in at.call.secrets]
    if missing:
        return Trouble(Reason.SECRET_NOT_FOUND, f"Secret {missing[0]!r} "
                       f"(spec.container.imagePullSecrets) was not found in namespace "
                       f"{at.call.namespace}.")
    try:
        return pull_credentials(at.call.secrets, container.pull_secrets,
                                container.image.registry)
    except PullSecretError as err:
        return Trouble(Reason.INVALID_SECRET, str(err))


def _after(at: Round, job: JobRequest, record: ImageRecord, prepared: PreparedImage) -> Gated:
    container = job.spec.container
    assert container is not None
    if prepared.state is Prepared.READY:
        return _ready(job, replace(record, digest=prepared.digest or record.digest,
                                   pull_failures=0, last_failure=""), prepared, _launcher(at))
    if prepared.state is Prepared.PULLING:
        return _waiting(at, record, Reason.PULLING_IMAGE,
                        f"Pulling {container.image.text} into the site's image cache with "
                        f"{container.runtime}.")
    if prepared.state is Prepared.MISSING and container.pull_policy is PullPolicy.NEVER:
        ended = unsent.never_pulled(at.prev, at.plan, backend=at.where.backend,
                                    cluster=at.where.cluster, message=(
                                        f"{container.image.text} is not in the site's image "
                                        "cache, and imagePullPolicy is Never."))
        return replace(ended, image=record)
    message = prepared.message or "the image is not in the site's image cache"
    return _failed(at, record, Trouble(Reason.IMAGE_PULL_BACKOFF,
                                       f"Pulling {container.image.text} failed: {message}"))


def _ready(job: JobRequest, record: ImageRecord, prepared: PreparedImage,
           launcher: tuple[str, ...]) -> tuple[JobRequest, ImageRecord]:
    """The job that runs the cached image: the script becomes the runtime's command line, and
    the BatchJob's own script, if any, a file the image runs."""
    container = job.spec.container
    assert container is not None
    script = wrapper.render(job.spec, prepared.path, prepared.config,
                            tuple(name for name, _ in job.environment), launcher)
    inputs = job.inputs
    if job.spec.script:
        inputs = (*inputs, InputFile(wrapper.SCRIPT, job.spec.script.encode()))
    return replace(job, spec=replace(job.spec, script=script), inputs=inputs), record


def _launcher(at: Round) -> tuple[str, ...]:
    return at.call.rules[at.where.backend].parallel_launcher


def _record(at: Round, container: Container) -> ImageRecord:
    """The attempt's record of its image: the last one, while it is of the same attempt and
    reference; else a new one."""
    kept = at.prev.image
    if (kept is not None and at.prev.attempt == at.plan.attempt
            and kept.reference == container.image.text and kept.runtime == container.runtime):
        return kept
    return ImageRecord(container.image.text, container.runtime, container.image.digest)


def _backing_off(at: Round, record: ImageRecord) -> bool:
    failed_at = response.parse_time(record.last_failure)
    return failed_at is not None and (at.call.now - failed_at).total_seconds() < pull_backoff(
        record.pull_failures)


def _failed(at: Round, record: ImageRecord, trouble: Trouble) -> Status:
    """A resolution or pull that failed: ``ImagePullBackOff``, its back-off counted from
    now."""
    record = replace(record, pull_failures=record.pull_failures + 1,
                     last_failure=response.format_time(at.call.now))
    wait = pull_backoff(record.pull_failures)
    return _waiting(at, record, Reason.IMAGE_PULL_BACKOFF,
                    f"{trouble.message.rstrip('.')}; tried again in {wait} s.")


def _waiting(at: Round, record: ImageRecord, reason: Reason, message: str) -> Status:
    new = unsent.staging(at.prev, at.plan, backend=at.where.backend, cluster=at.where.cluster,
                         reason=reason, message=message)
    return replace(new, image=record)


def _pull(job: JobRequest, container: Container, record: ImageRecord,
          resolved: ResolvedImage | Trouble | None,
          credentials: tuple[str, str] | None) -> ImagePull:
    """What the login node needs for the attempt's image: the pull of the recorded digest, or
    without one, a lookup of what the cache recorded for the reference."""
    image, digest = container.image, record.digest
    pinned = image.pinned(digest) if digest else ""
    return ImagePull(
        cache=container.image_cache, runtime=container.runtime,
        suffix=RUNTIMES[container.runtime].cached_name(BARE).removeprefix(BARE.replace(":", "-")),
        key=image.named, digest=digest,
        source=f"{image.transport}://{pinned}" if pinned else "", pinned=pinned,
        pull_dir=f"{job_root(job.spec.cluster.work_dir, job.namespace, job.name, job.uid)}"
                 f"/image-{job.attempt}",
        config=config_bytes(resolved.config) if isinstance(resolved, ResolvedImage) else b"",
        credentials=credentials, retry=record.pull_failures > 0)
