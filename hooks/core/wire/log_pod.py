"""The log Pod ``<name>-logs``: a child whose logs are the job's output.

It runs ``python -m hooks.pods.logs`` in the product's image as a restricted child Pod
(``hooks.core.wire.child_pod``: the route's Secrets mounted read-only, never as env) and prints
every task's stdout and stderr of one attempt. Its spec depends only on the attempt, so it stays
the same across syncs; a new attempt changes it, and the controller's ``Recreate`` strategy
replaces it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from hooks.core.spec.layout import work_dir
from hooks.core.status.record import Status
from hooks.core.values.job import ClusterRef, Hop, JobRequest, Spec, job_root
from hooks.core.values.phases import TERMINAL_PHASES, Phase
from hooks.core.wire import child_pod

PROGRAM = "hooks.pods.logs"
"""The log Pod's program, run as ``python -m``."""

def pod_name(batchjob: str) -> str:
    return f"{batchjob}-logs"


def pod_due(status: Status, *, follow: bool) -> bool:
    """Whether the current attempt's log Pod should exist (given ``spec.logs.pod``)."""
    if not status.job_ids:
        return False
    return status.phase in TERMINAL_PHASES or (follow and status.phase is Phase.RUNNING)


def log_pod(job: JobRequest, *, job_ids: tuple[str, ...], image: str) -> dict[str, Any]:
    """The desired log Pod of one attempt. Pure: no I/O."""
    spec = job.spec
    mounts, volumes = child_pod.secret_volumes(spec.cluster)
    args = [f"--backend={spec.backend}", *child_pod.login_args(spec.cluster),
            f"--remote-dir={job.remote_dir}", f"--key={job.key}",
            *(f"--job-id={job_id}" for job_id in job_ids),
            *(["--follow"] if spec.logs_follow else [])]
    main = child_pod.container("logs", image, PROGRAM, args, mounts=mounts, resources={
        "requests": {"cpu": "10m", "memory": "32Mi"},
        "limits": {"cpu": "200m", "memory": "128Mi"},
    })
    labels = {"app.kubernetes.io/component": "logs",
              "hpcbridge.io/batchjob": child_pod.label_value(job.name),
              "hpcbridge.io/attempt": str(job.attempt)}
    return child_pod.restricted_pod(pod_name(job.name), labels, main, volumes)


def carried_over(
    observed: Mapping[str, Any] | None, *, namespace: str, name: str, uid: str, image: str,
    clusters: Collection[ClusterRef],
) -> dict[str, Any] | None:
    """An observed log Pod declared again exactly as it was last applied, if it is one the
    hooks built for this BatchJob with today's image, for one of ``clusters`` (where the
    BatchJob's attempts run: the Pod logs in with the Secrets it mounts, so it may go nowhere
    else).

    Between attempts, the previous attempt's Pod keeps its logs visible until the new
    attempt's Pod replaces it; re-declaring its last-applied configuration changes nothing.
    The annotation is anyone's to edit, so it is never answered as it stands: the Pod is
    rebuilt from what it names (attempt, scheduler, host, directory, jobs) and carried over
    only when the rebuilt Pod is the annotation, to the letter, and is this BatchJob's
    (``name``) log Pod: a Pod of another name would be a child the BatchJob never had.
    """
    applied = child_pod.applied_configuration(observed)
    if applied is None:
        return None
    try:
        job, job_ids = _recognised(applied, namespace, uid)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None
    if job.name != name:
        return None
    if job.spec.cluster not in clusters:
        return None
    rebuilt = log_pod(job, job_ids=job_ids, image=image)
    return rebuilt if rebuilt == child_pod.without_selector_label(applied) else None


def _recognised(
    applied: dict[str, Any], namespace: str, uid: str
) -> tuple[JobRequest, tuple[str, ...]]:
    """The attempt a log Pod names: its args, label and volume, as ``log_pod`` wrote them."""
    (container,) = applied["spec"]["containers"]
    flags = {arg for arg in container["args"] if "=" not in arg}
    values: dict[str, list[str]] = {}
    for arg in container["args"]:
        name, sep, value = arg.partition("=")
        if sep:
            values.setdefault(name, []).append(value)
    (remote_dir,) = values["--remote-dir"]
    root, _, attempt = remote_dir.rpartition("/attempt-")
    name = applied["metadata"]["name"].removesuffix("-logs")
    directory = work_dir(root.removesuffix(f"/{namespace}/{name}/{uid}"), "--remote-dir")
    if root != job_root(directory, namespace, name, uid):
        raise ValueError("a log Pod of another BatchJob")
    (host,), (port,) = values["--host"], values["--port"]
    secrets = {volume["name"]: volume["secret"]["secretName"]
               for volume in applied["spec"]["volumes"]}
    mounted = {mount["mountPath"]: secrets[mount["name"]]
               for mount in container["volumeMounts"]}
    hops = []
    for jump in values.get("--jump", []):
        hop_host, hop_port, hop_dir, check = jump.split(",")
        hops.append(Hop(hop_host, int(hop_port), mounted[hop_dir], check == "insecure"))
    cluster = ClusterRef(host, int(port), secrets["cluster-secret"],
                         "--insecure-skip-host-key-check" in flags, tuple(hops), directory,
                         *(values.get("--batchcluster", []) + values.get("--known-hosts", [])))
    (backend,) = values["--backend"]
    spec = Spec(backend=backend, cluster=cluster, script="", logs_follow="--follow" in flags)
    job = JobRequest(namespace, name, uid, int(attempt), spec, 0)
    return job, tuple(values.get("--job-id", []))
