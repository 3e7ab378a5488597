"""The complete answer to a sync or finalize call: status, log Pod and when to sync again.

A 200 answer replaces status and children wholesale, so every answer built here carries the
complete status and the complete list of children.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hooks.core.decide.effects import Answer
from hooks.core.status import lifecycle, record
from hooks.core.status.record import Status
from hooks.core.values.job import JobRequest, Spec
from hooks.core.values.phases import Phase
from hooks.core.wire import log_pod, mover_pods, response
from hooks.core.wire.request import Call

FINALIZE_RESYNC = 3.0
"""Seconds until the next finalize call while the deletion waits for the cluster."""

BUSY_RESYNC = 5.0
"""Seconds until a call that found its route's or namespace's share taken is tried again."""


def build(
    call: Call, new: Status, *, next_attempt_due: bool = False, finalized: bool | None = None,
    notes: Sequence[str] = (), gave_up: bool = False,
) -> Answer:
    """The answer carrying ``new``; a finalize call fixes ``finalized``, and is called again
    after ``FINALIZE_RESYNC`` seconds until it is. Pure: no I/O."""
    pods = _children(call, new)
    logs_pod = pods[0]["metadata"]["name"] if pods else None
    pods = [*pods, *_mover_pods(call, new)]
    if new.logs_pod != logs_pod:
        new = replace(new, logs_pod=logs_pod)
    raw = record.to_raw(
        new, previous=call.previous_raw, now=response.format_time(call.now),
        generation=call.generation if call.shape == "decorator" else None,
    )
    if finalized is not None:
        resync = 0 if finalized else FINALIZE_RESYNC
    else:
        resync = response.resync_after(new, previous=call.previous_raw, uid=call.uid,
                                       now=call.now, next_attempt_due=next_attempt_due,
                                       floor=call.policy.status_ttl)
    body = response.envelope(call.shape, status=raw, children=pods, resync=resync,
                             finalized=finalized)
    return Answer(body, new, tuple(notes), gave_up)


def busy(call: Call) -> Answer:
    """The answer to a call that could not run now (its route or its namespace holds its whole
    share of the hook threads): the status as it was, and a sync again soon. Pure: no I/O."""
    note = (f"{call.namespace}/{call.name}: its cluster's or namespace's share of the hook "
            "threads is taken; trying again soon")
    kept = build(call, call.previous, finalized=False if call.finalizing else None,
                 notes=(note,))
    return replace(kept, body={**kept.body, "resyncAfterSeconds": BUSY_RESYNC})


def _children(call: Call, new: Status) -> Sequence[dict[str, Any]]:
    """The log Pod the status implies: the current attempt's once it is due, else the one
    observed (the previous attempt's keeps its logs visible until it is replaced)."""
    if not call.logs.pod:
        return []
    spec = _attempt_spec(call, new)
    if spec is not None and log_pod.pod_due(new, follow=call.logs.follow):
        job = JobRequest(call.namespace, call.name, call.uid, new.attempt, spec,
                         call.policy.guard_stale)
        return [log_pod.log_pod(job, job_ids=new.job_ids, image=call.policy.log_image)]
    known = {c for c in (call.previous.cluster, new.cluster,
                         call.parsed.placement.cluster if call.parsed.placement else None) if c}
    kept = log_pod.carried_over(call.log_pod, namespace=call.namespace, name=call.name,
                                 uid=call.uid, image=call.policy.log_image, clusters=known)
    return [kept] if kept else []


def _mover_pods(call: Call, new: Status) -> list[dict[str, Any]]:
    """The mover Pods ``new`` implies: the inputs mover until the attempt is submitted, the
    outputs mover while its outputs are collected."""
    spec = call.parsed.spec
    if spec is None or call.finalizing:
        return []
    pods = []
    if spec.data_inputs and new.inputs is not None and not new.job_ids and (
            new.phase is Phase.PENDING):
        pods.append(mover_pods.inputs_pod(_attempt_job(call, new), image=call.policy.log_image))
    if lifecycle.collecting_outputs(new):
        pod = outputs_pod(call, new)
        if pod is not None:
            pods.append(pod)
    return pods


def outputs_pod(call: Call, status: Status) -> dict[str, Any] | None:
    """The outputs mover of the attempt ``status`` has collecting its outputs."""
    assert status.outputs is not None and status.outputs.attempt_phase is not None
    return mover_pods.outputs_pod(_attempt_job(call, status), status.outputs.attempt_phase,
                                  image=call.policy.log_image)


def _attempt_job(call: Call, status: Status) -> JobRequest:
    spec = _attempt_spec(call, status)
    assert spec is not None
    return JobRequest(call.namespace, call.name, call.uid, status.attempt, spec,
                      call.policy.guard_stale)


def _attempt_spec(call: Call, new: Status) -> Spec | None:
    """The spec of the attempt as it runs: where the status says it was submitted (which an
    edit, or a BatchCluster deleted meanwhile, does not move), else where the spec says."""
    spec = call.parsed.spec
    if new.cluster is None:
        return spec
    if spec is None:
        if new.backend not in call.rules:
            return None
        spec = Spec(backend=new.backend, cluster=new.cluster, script="")
    return replace(spec, backend=new.backend or spec.backend, cluster=new.cluster,
                   logs_follow=call.logs.follow)
