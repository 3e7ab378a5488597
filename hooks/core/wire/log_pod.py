"""The log Pod ``<name>-logs``: a child whose logs are the job's output.

It runs ``python -m hooks.logs`` in the product's image, mounts the cluster Secret read-only
(never as env), runs as non-root with a read-only root filesystem, and prints every task's
stdout and stderr of one attempt. Its spec depends only on the attempt, so it stays the same
across syncs; a new attempt changes it, and the controller's ``Recreate`` strategy replaces it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from hooks.core.spec.layout import work_dir
from hooks.core.status.record import Status
from hooks.core.values.job import ClusterRef, Hop, JobRequest, Spec, job_root
from hooks.core.values.phases import TERMINAL_PHASES, Phase

SECRET_MOUNT = "/var/run/secrets/hpcbridge"
"""Where the cluster Secret is mounted; a jump host's own Secret goes to ``-jump-<i>`` beside
it."""
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
SELECTOR_LABEL = "controller-uid"
MAX_APPLIED = 64 * 1024
"""The longest last-applied configuration read back (a log Pod's is about 2 KB)."""
UID = 65532


def label_value(name: str) -> str:
    """``name`` as a label value: at most 63 characters, so long names keep a stable digest.

    >>> label_value("a" * 70)[-9:]
    '-6bd5e503'
    """
    if len(name) <= 63:
        return name
    return f"{name[:54]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


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
    mounts, volumes = secret_volumes(spec.cluster)
    args = [
        f"--backend={spec.backend}",
        f"--host={spec.cluster.host}",
        f"--port={spec.cluster.port}",
        f"--remote-dir={job.remote_dir}",
        f"--key={job.key}",
        f"--secret-dir={SECRET_MOUNT}",
        *(f"--job-id={job_id}" for job_id in job_ids),
        *(f"--jump={hop.host},{hop.port},{directory},"
          f"{'insecure' if hop.insecure_skip_host_key_check else 'verify'}"
          for hop, directory in zip(spec.cluster.jump, hop_dirs(spec.cluster), strict=True)),
    ]
    if spec.logs_follow:
        args.append("--follow")
    if spec.cluster.insecure_skip_host_key_check:
        args.append("--insecure-skip-host-key-check")
    args += site_args(spec.cluster)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job.name),
            "labels": {
                "app.kubernetes.io/name": "hpcbridge",
                "app.kubernetes.io/component": "logs",
                "hpcbridge.io/batchjob": label_value(job.name),
                "hpcbridge.io/attempt": str(job.attempt),
            },
        },
        "spec": {
            "restartPolicy": "OnFailure",
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": UID,
                "runAsGroup": UID,
                "fsGroup": UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "logs",
                    "image": image,
                    "command": ["python", "-m", "hooks.logs"],
                    "args": args,
                    "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "32Mi"},
                        "limits": {"cpu": "200m", "memory": "128Mi"},
                    },
                    "securityContext": {
                        "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }


def site_args(cluster: ClusterRef) -> list[str]:
    """A BatchCluster's name and host keys, the only keys a child Pod trusts on its route
    (public, no Secret); nothing for a route the BatchJob names itself."""
    if not cluster.site:
        return []
    return [f"--batchcluster={cluster.site}", f"--known-hosts={cluster.known_hosts}"]


def hop_dirs(cluster: ClusterRef) -> list[str]:
    """Where each jump host's Secret is mounted: the cluster Secret's mount when it is the
    same Secret, else a mount of its own."""
    return [SECRET_MOUNT if hop.secret_name == cluster.secret_name else f"{SECRET_MOUNT}-jump-{i}"
            for i, hop in enumerate(cluster.jump)]


def secret_volumes(cluster: ClusterRef) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The read-only mounts and volumes of every Secret of the route to the cluster."""
    named = [("cluster-secret", SECRET_MOUNT, cluster.secret_name)]
    named += [(f"jump-{i}-secret", directory, hop.secret_name)
              for i, (hop, directory) in enumerate(zip(cluster.jump, hop_dirs(cluster),
                                                       strict=True))
              if directory != SECRET_MOUNT]
    mounts = [{"name": name, "mountPath": path, "readOnly": True} for name, path, _ in named]
    volumes = [{"name": name, "secret": {"secretName": secret, "defaultMode": 0o440}}
               for name, _, secret in named]
    return mounts, volumes


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
    applied = applied_configuration(observed)
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
    return rebuilt if rebuilt == without_selector_label(applied) else None


def without_selector_label(applied: dict[str, Any]) -> dict[str, Any]:
    """``applied`` without the label Metacontroller adds to every child it applies
    (``generateSelector``); it adds it again to the Pod answered."""
    labels = applied.get("metadata", {}).get("labels")
    if not isinstance(labels, dict) or SELECTOR_LABEL not in labels:
        return applied
    kept = {k: v for k, v in labels.items() if k != SELECTOR_LABEL}
    return {**applied, "metadata": {**applied["metadata"], "labels": kept}}


def applied_configuration(observed: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The observed Pod's last-applied configuration, read defensively."""
    metadata = observed.get("metadata") if isinstance(observed, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    text = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    if not isinstance(text, str) or len(text) > MAX_APPLIED:
        return None
    try:
        applied = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return applied if isinstance(applied, dict) and applied.get("kind") == "Pod" else None


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
