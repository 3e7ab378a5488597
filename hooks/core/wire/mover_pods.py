"""The mover Pods ``<name>-inputs`` and ``<name>-outputs``: children that copy a BatchJob's data,
and what the hooks read back from them. Pure: no I/O.

They run ``python -m hooks.pods.movers`` in the product's image as restricted child Pods, like
the log Pod (``hooks.core.wire.child_pod``): the cluster's SSH Secret and the S3 Secret
(``spec.storage``) are mounted read-only, never put in env, and the claims are mounted (read-
only for inputs). The inputs mover uploads the inputs over SFTP into the attempt's staging
directory (``staging_dir``), which the guarded submission moves into the attempt's directory;
the outputs mover reads the attempt's directory and writes objects or files. Each reports what
it did as its termination message (``Report``, JSON), which Metacontroller hands back with the
observed child, so ``status.inputs``/``status.outputs`` follow from the observed Pods alone. A
failed run exits non-zero and the kubelet runs it again (``restartPolicy: OnFailure``).

A mover talks to the object store only at a public address (``hooks.pods.movers.peer``) unless
its args say the endpoint is on an allow-list (``--endpoint-allowed``,
``hooks.core.spec.endpoints``): the hooks write the args, never the BatchJob.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hooks.core.status.transfers import Stage, Transfer
from hooks.core.values.job import JobRequest, job_root
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from hooks.core.values.storage import When
from hooks.core.wire import child_pod

PROGRAM = "hooks.pods.movers"
"""The mover Pods' program, run as ``python -m``."""
REPORT_PATH = "/dev/termination-log"
S3_MOUNT = "/var/run/secrets/hpcbridge-s3"
VOLUME_MOUNT = "/var/run/hpcbridge/claims"
MAX_MESSAGE = 1024
OUTPUT_TRIES = 5
"""Runs of the outputs mover that may fail before the collection has failed."""
PEAK_MEMORY = 128 * 2**20
"""The most a mover holds in memory, whatever the sizes and the number of files (measured
about 95 MiB on the S3 path, bench/results.md; checked by tests/integration/test_data.py):
the program and its libraries (about 55 MiB), the upload parts of ``hooks.pods.movers.store`` (two
sent while a third is read and joined: 4 x 8 MiB), the SFTP reads in flight and the channel's
window (``hooks.ssh.files``: 4 and 8 MiB). Above 78 GiB an object's parts grow (S3 allows 10000),
and so does this."""
REASONS = {Reason.INPUT_NOT_FOUND, Reason.STORAGE_ACCESS_DENIED, Reason.OUTPUTS_FAILED}


@dataclass(frozen=True, slots=True)
class Report:
    """What a mover run did: ``Done`` (files, bytes) or ``Failed`` (a reason and a sentence)."""

    phase: Stage
    files: int = 0
    bytes: int = 0
    reason: Reason = Reason.NONE
    message: str = ""

    def to_json(self) -> str:
        return json.dumps({"phase": str(self.phase), "files": self.files, "bytes": self.bytes,
                           "reason": str(self.reason), "message": self.message[:MAX_MESSAGE]})


def staging_dir(job: JobRequest) -> str:
    """Where the inputs mover puts attempt ``job.attempt``'s inputs: beside its directory."""
    return f"{job_root(job.spec.cluster.work_dir, job.namespace, job.name, job.uid)}" \
           f"/staging-{job.attempt}"


def inputs_pod(job: JobRequest, *, image: str) -> dict[str, Any]:
    """The inputs mover of attempt ``job``."""
    spec = job.spec
    plan: list[dict[str, Any]] = []
    claims: list[str] = []
    for item in spec.data_inputs:
        if item.s3 is not None:
            plan.append({"path": item.path, "s3": {"bucket": item.s3.bucket, "key": item.s3.key,
                                                   "prefix": item.s3.prefix}})
        else:
            assert item.volume is not None
            plan.append({"path": item.path, "dir": _claim_path(claims, item.volume.claim,
                                                               item.volume.sub_path)})
    return _pod(job, "inputs", plan, claims, image=image)


def outputs_pod(job: JobRequest, ended: Phase, *, image: str) -> dict[str, Any] | None:
    """The outputs mover of attempt ``job`` after it ended ``ended``; None when no output's
    ``when`` matches that end."""
    plan: list[dict[str, Any]] = []
    claims: list[str] = []
    for item in job.spec.outputs:
        if not due(item.when, ended):
            continue
        entry: dict[str, Any] = {"pattern": item.pattern, "optional": item.optional}
        if item.s3 is not None:
            entry["s3"] = {"bucket": item.s3.bucket, "prefix": item.s3.prefix}
        else:
            assert item.volume is not None
            entry["dir"] = _claim_path(claims, item.volume.claim, item.volume.sub_path)
        plan.append(entry)
    if not plan:
        return None
    return _pod(job, "outputs", plan, claims, image=image)


def due(when: When, ended: Phase) -> bool:
    """Whether an output with ``when`` is collected after an attempt that ended ``ended``."""
    if when is When.ALWAYS:
        return True
    return (ended is Phase.SUCCEEDED) is (when is When.ON_SUCCESS)


def observe(pod: Mapping[str, Any] | None, desired: Mapping[str, Any], *,
            tries: int | None = None) -> Transfer:
    """What the observed mover ``pod`` did, if it is the ``desired`` one (an older attempt's
    Pod, or one from another spec, counts as not there yet). After ``tries`` failed runs the
    transfer has failed; until then a failed run is retried (``Staging``, with why)."""
    if not isinstance(pod, dict) or not _is(pod, desired):
        return Transfer(Stage.PENDING)
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    assert isinstance(status, dict)
    containers = status.get("containerStatuses")
    container = containers[0] if isinstance(containers, list) and containers and isinstance(
        containers[0], dict) else {}
    ended = _terminated(container.get("state"))
    if ended is not None and ended[0] == 0:
        report = _report(ended[1])
        if report.phase is Stage.FAILED:
            return Transfer(Stage.FAILED, report.files, report.bytes, report.message,
                            report.reason or Reason.OUTPUTS_FAILED)
        return Transfer(Stage.DONE, report.files, report.bytes)
    last = ended or _terminated(container.get("lastState"))
    restarts = container.get("restartCount")
    runs = (restarts if isinstance(restarts, int) and not isinstance(restarts, bool) else 0) + (
        1 if ended else 0)
    if status.get("phase") == "Failed" and last is None:
        return Transfer(Stage.FAILED, message=f"The mover Pod failed: {_text(status, 'reason')}"
                                              f" {_text(status, 'message')}".strip())
    if last is None:
        waiting = container.get("state", {}).get("waiting") if isinstance(
            container.get("state"), dict) else None
        why = f"{_text(waiting, 'reason')}: {_text(waiting, 'message')}" if isinstance(
            waiting, dict) and _text(waiting, "reason") not in ("", "ContainerCreating") else ""
        return Transfer(Stage.STAGING, message=why)
    report = _report(last[1])
    message = report.message or f"The mover exited {last[0]}."
    if tries is not None and runs >= tries:
        return Transfer(Stage.FAILED, message=f"{message} (after {runs} tries)",
                        reason=Reason.OUTPUTS_FAILED)
    return Transfer(Stage.STAGING, message=message, reason=report.reason)


def pod_name(batchjob: str, direction: str) -> str:
    return f"{batchjob}-{direction}"


def _claim_path(claims: list[str], claim: str, sub_path: str) -> str:
    """The mount of ``claim`` (one volume per claim) and ``sub_path`` in it."""
    if claim not in claims:
        claims.append(claim)
    mount = f"{VOLUME_MOUNT}/{claims.index(claim)}"
    return f"{mount}/{sub_path}" if sub_path else mount


def _pod(job: JobRequest, direction: str, plan: list[dict[str, Any]], claims: list[str], *,
         image: str) -> dict[str, Any]:
    """A mover Pod; the inputs mover mounts the claims read-only."""
    spec, read_only = job.spec, direction == "inputs"
    mounts, volumes = child_pod.secret_volumes(spec.cluster)
    args = [direction, *child_pod.login_args(spec.cluster), f"--remote-dir={job.remote_dir}",
            *([f"--staging-dir={staging_dir(job)}"] if read_only else []),
            f"--owner={job.uid}", f"--report={REPORT_PATH}",
            f"--plan={json.dumps(plan, sort_keys=True, separators=(',', ':'))}"]
    if spec.storage is not None:
        args += [f"--endpoint={spec.storage.endpoint}", f"--s3-secret-dir={S3_MOUNT}"]
        if spec.storage.allowed:  # on an allow-list: whatever its address
            args.append("--endpoint-allowed")
        if spec.storage.region:
            args.append(f"--region={spec.storage.region}")
        mounts.append({"name": "s3-secret", "mountPath": S3_MOUNT, "readOnly": True})
        volumes.append({"name": "s3-secret", "secret": {"secretName": spec.storage.secret_name,
                                                        "defaultMode": 0o440}})
    for i, claim in enumerate(claims):
        mounts.append({"name": f"claim-{i}", "mountPath": f"{VOLUME_MOUNT}/{i}",
                       "readOnly": read_only})
        volumes.append({"name": f"claim-{i}", "persistentVolumeClaim": {
            "claimName": claim, "readOnly": read_only}})
    main = child_pod.container(direction, image, PROGRAM, args, mounts=mounts,
                               resources=_resources())
    main.update(terminationMessagePath=REPORT_PATH, terminationMessagePolicy="File")
    labels = {"app.kubernetes.io/component": direction,
              "hpcbridge.io/batchjob": child_pod.label_value(job.name),
              "hpcbridge.io/attempt": str(job.attempt)}
    return child_pod.restricted_pod(pod_name(job.name, direction), labels, main, volumes)


def _resources() -> dict[str, Any]:
    """Memory: ``PEAK_MEMORY`` requested, half as much again the limit."""
    return {"requests": {"cpu": "50m", "memory": f"{PEAK_MEMORY // 2**20}Mi"},
            "limits": {"cpu": "1", "memory": f"{PEAK_MEMORY * 3 // 2 // 2**20}Mi"}}


def _is(pod: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    observed = child_pod.applied_configuration(pod)
    return observed is not None and child_pod.without_selector_label(observed) == desired


def _terminated(state: object) -> tuple[int, str] | None:
    ended = state.get("terminated") if isinstance(state, dict) else None
    if not isinstance(ended, dict):
        return None
    code = ended.get("exitCode")
    message = ended.get("message")
    return (code if isinstance(code, int) and not isinstance(code, bool) else 1,
            message if isinstance(message, str) else "")


def _report(text: str) -> Report:
    """A mover's report, read as hostile text: anything else is no report."""
    try:
        raw = json.loads(text[:8192])
    except (ValueError, RecursionError):
        return Report(Stage.FAILED, message=text[:MAX_MESSAGE].strip())
    if not isinstance(raw, dict):
        return Report(Stage.FAILED)
    try:
        reason = Reason(raw.get("reason", ""))
    except ValueError:
        reason = Reason.NONE
    counts = [_count(raw.get(k)) for k in ("files", "bytes")]
    phase = Stage.DONE if raw.get("phase") == "Done" else Stage.FAILED
    return Report(phase, counts[0], counts[1], reason if reason in REASONS else Reason.NONE,
                  _text(raw, "message"))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and (
        0 <= value < 2**63) else 0


def _text(raw: object, key: str) -> str:
    value = raw.get(key) if isinstance(raw, dict) else None
    return value[:MAX_MESSAGE] if isinstance(value, str) else ""
