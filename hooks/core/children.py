"""The log Pod ``<name>-logs``: a child whose logs are the job's output.

It runs ``python -m hooks.logs`` in the product's image, mounts the cluster Secret read-only
(never as env), runs as non-root with a read-only root filesystem, and prints every task's
stdout and stderr of one attempt. Its spec depends only on the attempt, so it stays the same
across syncs; a new attempt changes it, and the controller's ``Recreate`` strategy replaces it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from hooks.core.model import TERMINAL_PHASES, JobRequest, Phase
from hooks.core.status import Status

SECRET_MOUNT = "/var/run/secrets/hpcbridge"
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
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
    args = [
        f"--backend={spec.backend}",
        f"--host={spec.cluster.host}",
        f"--port={spec.cluster.port}",
        f"--remote-dir={job.remote_dir}",
        f"--key={job.key}",
        f"--secret-dir={SECRET_MOUNT}",
        *(f"--job-id={job_id}" for job_id in job_ids),
    ]
    if spec.logs_follow:
        args.append("--follow")
    if spec.cluster.insecure_skip_host_key_check:
        args.append("--insecure-skip-host-key-check")
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
                    "volumeMounts": [
                        {"name": "cluster-secret", "mountPath": SECRET_MOUNT, "readOnly": True}
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "cluster-secret",
                    "secret": {"secretName": spec.cluster.secret_name, "defaultMode": 0o440},
                }
            ],
        },
    }


def carried_over(observed: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An observed log Pod declared again exactly as it was last applied.

    Between attempts, the previous attempt's Pod keeps its logs visible until the new
    attempt's Pod replaces it; re-declaring its last-applied configuration changes nothing.
    """
    if observed is None:
        return None
    annotations = (observed.get("metadata") or {}).get("annotations") or {}
    try:
        applied = json.loads(annotations.get(LAST_APPLIED) or "null")
    except (TypeError, ValueError):
        return None
    if not isinstance(applied, dict) or applied.get("kind") != "Pod":
        return None
    return applied
