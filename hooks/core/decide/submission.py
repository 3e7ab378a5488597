"""The submission of an attempt: its env and input files resolved, its inputs staged and its
image in the site's cache first, then the guarded submission (never sent twice) and what it
answered; a job it has is tracked from then on. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from hooks.core.decide import images, staging
from hooks.core.decide.effects import Effects, Submit, Track, Trouble
from hooks.core.decide.rounds import Reached, Round
from hooks.core.spec import payload
from hooks.core.spec.batchjob import Placement, digest
from hooks.core.status import lifecycle
from hooks.core.status.record import Status
from hooks.core.values.job import JobRef, JobRequest, Resources, Spec, SubmitAnswer, SubmitOutcome
from hooks.core.values.reasons import Reason
from hooks.core.wire import response
from hooks.core.wire.request import Call


def submit(at: Round, spec: Spec) -> Effects[Status | Reached]:
    """Submit the attempt (guarded: one submitted before is found, never sent twice) once its
    inputs are staged and its image is in the site's cache, then have the shared status track
    its job."""
    job = _job(at, spec)
    if isinstance(job, Status):
        return job
    gated = staging.gate(at, job)
    if isinstance(gated, Status):
        return gated
    job, inputs = gated
    asked = job.spec  # the spec as written, before its container becomes the script
    pulled = yield from images.gate(at, job)
    if isinstance(pulled, Status):
        return replace(pulled, inputs=inputs)
    job, image = pulled
    outcome: SubmitOutcome | Trouble = yield at.effect(Submit(job))
    if isinstance(outcome, Trouble):
        return at.unreachable(outcome)
    prev, plan = at.prev, at.plan
    kept = prev.spec_hash if prev.attempt == plan.attempt and prev.spec_hash else digest(asked)
    reached = yield from _sent(at, job, outcome)
    if isinstance(reached, Status):
        return reached
    return replace(reached, status=replace(reached.status, spec_hash=kept, inputs=inputs,
                                           image=image))


def _sent(at: Round, job: JobRequest, outcome: SubmitOutcome) -> Effects[Status | Reached]:
    """Where the guarded submission left the attempt; a job it has is tracked from now on."""
    call, prev, plan = at.call, at.prev, at.plan
    backend, cluster = at.where.backend, at.where.cluster
    if outcome.answer is SubmitAnswer.IN_FLIGHT:
        return Reached(lifecycle.in_flight(prev, plan, backend=backend, cluster=cluster))
    if outcome.answer is SubmitAnswer.REFUSED:
        return Reached(lifecycle.refused(prev, plan, backend=backend, cluster=cluster,
                                         message=outcome.message))
    if outcome.answer is SubmitAnswer.TRANSIENT:
        return at.unreachable(Trouble(
            Reason.CLUSTER_UNREACHABLE,
            f"The scheduler did not take the submission ({outcome.message}); it is retried "
            "once the attempt's guard expires."))
    ref = JobRef(job.key, outcome.job_id,
                 call.rules[backend].expected_tasks(job.spec.options, outcome.job_id))
    new = lifecycle.submitted(prev, plan, backend=backend, cluster=cluster, job=ref,
                              now=response.format_time(call.now))
    yield at.effect(Track(ref))
    notes = (f"submitted {call.namespace}/{call.name} attempt {plan.attempt} as {backend} "
             f"job {outcome.job_id}",) if outcome.answer is SubmitAnswer.SUBMITTED else ()
    return Reached(new, notes)


def _job(at: Round, spec: Spec) -> JobRequest | Status:
    """The attempt to submit, with its env and input files; or the status saying why the
    objects they come from cannot be read."""
    call = at.call
    resolved = payload.resolve(spec, namespace=call.namespace, secrets=call.secrets,
                               config_maps=call.config_maps,
                               writes_file=call.rules[at.where.backend].writes_file)
    if isinstance(resolved, payload.Unresolved):
        if resolved.reason is Reason.INVALID_SPEC:
            return lifecycle.invalid_spec(at.prev, resolved.message, backend=at.where.backend)
        return at.unreachable(Trouble(resolved.reason, resolved.message))
    return JobRequest(call.namespace, call.name, call.uid, at.plan.attempt,
                      _for_attempt(call, spec, at.where), call.policy.guard_stale,
                      environment=resolved.environment, inputs=resolved.inputs)


def _for_attempt(call: Call, spec: Spec, where: Placement) -> Spec:
    """The spec as the attempt is submitted: on the cluster (route, workDir) it was first sent
    to, and, after an edit changed ``spec.backend``, with that scheduler's defaults for its
    own block."""
    spec = replace(spec, cluster=where.cluster)
    if spec.backend == where.backend:
        return spec
    return replace(spec, backend=where.backend,
                   options=call.rules[where.backend].parse_options({}, Resources()))
