"""What every child Pod of a BatchJob shares — the log Pod and the mover Pods: how it logs in
to the cluster (``login_args``, read back by ``hooks.pods.login``), the Secrets of the route
mounted read-only (never as env), and the ``restricted`` Pod around its one container: non-root,
a read-only root filesystem, no service account token. And how the hooks read back what they
applied: Metacontroller's last-applied configuration, without the selector label it adds.
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from hooks.core.values.job import ClusterRef

SECRET_MOUNT = "/var/run/secrets/hpcbridge"
"""Where the cluster Secret is mounted; a jump host's own Secret goes to ``-jump-<i>`` beside
it."""
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
SELECTOR_LABEL = "controller-uid"
MAX_APPLIED = 64 * 1024
"""The longest last-applied configuration read back (a log Pod's is about 2 KB)."""
UID = 65532


def login_args(cluster: ClusterRef) -> list[str]:
    """How a child Pod logs in to the cluster: host, port, the Secret mounts, the jump hosts in
    order, and on a BatchCluster's route its name and host keys (public, no Secret), the only
    keys trusted along it."""
    args = [f"--host={cluster.host}", f"--port={cluster.port}", f"--secret-dir={SECRET_MOUNT}"]
    for hop, directory in zip(cluster.jump, hop_dirs(cluster), strict=True):
        check = "insecure" if hop.insecure_skip_host_key_check else "verify"
        args.append(f"--jump={hop.host},{hop.port},{directory},{check}")
    if cluster.insecure_skip_host_key_check:
        args.append("--insecure-skip-host-key-check")
    if cluster.site:
        args += [f"--batchcluster={cluster.site}", f"--known-hosts={cluster.known_hosts}"]
    return args


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


def container(name: str, image: str, program: str, args: list[str], *,
              mounts: list[dict[str, Any]], resources: dict[str, Any]) -> dict[str, Any]:
    """The one container of a child Pod: ``python -m <program>`` in the product's image,
    with nothing to escalate and nothing to write but its volumes."""
    return {
        "name": name,
        "image": image,
        "command": ["python", "-m", program],
        "args": args,
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": resources,
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }


def restricted_pod(name: str, labels: Mapping[str, str], main: dict[str, Any],
                   volumes: list[dict[str, Any]]) -> dict[str, Any]:
    """A Pod of the ``restricted`` Pod Security profile around ``main``, restarted on
    failure."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "hpcbridge", **labels}},
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
            "containers": [main],
            "volumes": volumes,
        },
    }


def label_value(name: str) -> str:
    """``name`` as a label value: at most 63 characters, so long names keep a stable digest.

    >>> label_value("a" * 70)[-9:]
    '-6bd5e503'
    """
    if len(name) <= 63:
        return name
    return f"{name[:54]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


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


def without_selector_label(applied: dict[str, Any]) -> dict[str, Any]:
    """``applied`` without the label Metacontroller adds to every child it applies
    (``generateSelector``); it adds it again to the Pod answered."""
    labels = applied.get("metadata", {}).get("labels")
    if not isinstance(labels, dict) or SELECTOR_LABEL not in labels:
        return applied
    kept = {k: v for k, v in labels.items() if k != SELECTOR_LABEL}
    return {**applied, "metadata": {**applied["metadata"], "labels": kept}}
