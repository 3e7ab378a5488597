"""Data around an attempt: its S3 and claim inputs before the submission, its outputs after
its end, and the mover Pods that copy them (``hooks.core.wire.mover_pods``). Pure: no I/O.

Before an attempt with such inputs is submitted, its inputs mover must have reported them
staged; until then the BatchJob waits in ``Pending`` (``StagingInputs``, or ``InputNotFound``
and ``StorageAccessDenied`` from the mover's last run, which the kubelet runs again). After
an attempt ends with outputs whose ``when`` matches, it shows ``Running``/``CollectingOutputs``
until the outputs mover reports; then the attempt's own end, or ``Failed``/``OutputsFailed``
for a succeeded job whose outputs could not be collected (a failed job keeps its reason).
"""

from __future__ import annotations

from dataclasses import replace

from hooks.core.decide import answer
from hooks.core.decide.rounds import Round
from hooks.core.status import unsent
from hooks.core.status.record import Status
from hooks.core.status.transfers import Stage, Transfer
from hooks.core.values.job import JobRequest
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from hooks.core.wire import mover_pods
from hooks.core.wire.request import Call


def gate(at: Round, job: JobRequest) -> tuple[JobRequest, Transfer | None] | Status:
    """The job to submit, with its staged inputs, and what the inputs mover reported; or the
    status that waits for them."""
    spec = job.spec
    if not spec.data_inputs:
        return job, None
    call, prev, plan = at.call, at.prev, at.plan
    desired = mover_pods.inputs_pod(job, image=call.policy.log_image)
    seen = mover_pods.observe(call.movers.get("inputs"), desired)
    if (seen.phase is not Stage.DONE and prev.attempt == plan.attempt
            and prev.inputs is not None and prev.inputs.phase is Stage.DONE):
        seen = prev.inputs
    if seen.phase is Stage.DONE:
        tops = tuple(dict.fromkeys(item.path.partition("/")[0] for item in spec.data_inputs))
        return replace(job, staging=mover_pods.staging_dir(job), staged=tops), seen
    pod = mover_pods.pod_name(call.name, "inputs")
    message = (f"Staging the inputs (Pod {pod}): {seen.message}" if seen.message
               else f"The inputs are being staged on the cluster by Pod {pod}.")
    new = unsent.staging(prev, plan, backend=at.where.backend, cluster=at.where.cluster,
                            reason=seen.reason or Reason.STAGING_INPUTS, message=message)
    return replace(new, inputs=seen)


def ended(call: Call, new: Status) -> Status:
    """The attempt's end, or, when outputs are due after it, ``CollectingOutputs``."""
    spec = call.parsed.spec
    if spec is None or not any(mover_pods.due(o.when, new.phase) for o in spec.outputs):
        return new
    return replace(
        new, phase=Phase.RUNNING, reason=Reason.COLLECTING_OUTPUTS,
        message=f"Attempt {new.attempt} ended ({new.phase}); collecting its outputs (Pod "
                f"{mover_pods.pod_name(call.name, 'outputs')}).",
        outputs=Transfer(Stage.STAGING, attempt_phase=new.phase, attempt_reason=new.reason,
                         attempt_message=new.message))


def collected(call: Call, prev: Status) -> Status:
    """Where the collection of the outputs stands, from the observed outputs mover."""
    kept = prev.outputs
    assert kept is not None and kept.attempt_phase is not None
    pod = answer.outputs_pod(call, prev)
    seen = (mover_pods.observe(call.movers.get("outputs"), pod, tries=mover_pods.OUTPUT_TRIES)
            if pod is not None else Transfer(Stage.DONE))
    if seen.phase in (Stage.PENDING, Stage.STAGING):
        return replace(prev, outputs=replace(kept, phase=Stage.STAGING, message=seen.message,
                                             reason=seen.reason))
    done = Transfer(seen.phase, seen.files, seen.bytes, seen.message, seen.reason)
    phase, reason, message = kept.attempt_phase, kept.attempt_reason, kept.attempt_message
    if seen.phase is Stage.FAILED and phase is Phase.SUCCEEDED:
        phase, reason = Phase.FAILED, Reason.OUTPUTS_FAILED
        message = f"The job succeeded, but its outputs were not collected: {seen.message}"
    elif seen.phase is Stage.DONE:
        message = f"{message} Outputs: {seen.files} files, {seen.bytes} bytes.".strip()
    return replace(prev, phase=phase, reason=reason, message=message, outputs=done)
