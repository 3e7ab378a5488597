"""The sync decision: what one sync of a BatchJob does, as steps for the shell to run.

``decide`` plans from the last status (``lifecycle.plan``) and answers at once when nothing
is due or the spec or Secret rules it out; otherwise it asks for one remote step — submit the
planned attempt, or look the current one up — and continues from its result. An attempt that
ended by an infrastructure failure within ``backoffLimit`` is resubmitted in the same sync, so
that the BatchJob does not flash Failed. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hooks.core import aggregate, answer, lifecycle, response
from hooks.core.lifecycle import Plan
from hooks.core.lifecycle import Step as Planned
from hooks.core.model import (
    ClusterRef,
    JobRef,
    JobRequest,
    Reason,
    Resources,
    Spec,
    SubmitAnswer,
    SubmitOutcome,
    TaskState,
    attempt_dir,
    attempt_key,
)
from hooks.core.request import Call
from hooks.core.secret import Credentials, SecretError, parse_secret
from hooks.core.spec import Placement
from hooks.core.status import Status
from hooks.core.steps import (
    Decision,
    Forget,
    MarkEnded,
    Query,
    Step,
    Submit,
    Track,
    Trouble,
)


def decide(call: Call) -> Decision:
    """The first decision of a sync call. Pure: no I/O."""
    return _next(call, call.previous, again=True)


def _next(call: Call, prev: Status, *, again: bool) -> Decision:
    spec = call.parsed.spec
    plan = lifecycle.plan(prev, generation=call.generation,
                          backoff_limit=spec.backoff_limit if spec else 0)
    if plan.step is Planned.IDLE:
        return answer.build(call, prev)
    same_attempt = plan.step is Planned.TRACK or plan.attempt == prev.attempt
    where = attempt_placement(call, prev) if same_attempt else call.parsed.placement
    if where is None or (spec is None and plan.step is Planned.SUBMIT):
        return answer.build(call, lifecycle.invalid_spec(prev, call.parsed.error,
                                                         backend=call.parsed.backend))
    creds = credentials(call, where.cluster)
    if isinstance(creds, Trouble):
        return _unreachable(call, prev, plan, where, creds)
    if plan.step is Planned.SUBMIT:
        assert spec is not None
        job = JobRequest(call.namespace, call.name, call.uid, plan.attempt,
                         _for_backend(call, spec, where.backend), call.policy.guard_stale)
        return Step(where, creds, Submit(job),
                    lambda result: _submitted(call, prev, plan, where, creds, job, result, again))
    job_ids = prev.job_ids
    ref = JobRef(attempt_key(call.uid, plan.attempt),
                 call.rules[where.backend].job_id(job_ids[0]), job_ids)
    return Step(where, creds, Query(ref),
                lambda result: _observed(call, prev, plan, where, creds, ref, result, again))


def _submitted(
    call: Call, prev: Status, plan: Plan, where: Placement, creds: Credentials,
    job: JobRequest, result: SubmitOutcome | Trouble, again: bool,
) -> Decision:
    if isinstance(result, Trouble):
        return _unreachable(call, prev, plan, where, result)
    backend, cluster = where.backend, where.cluster
    if result.answer is SubmitAnswer.IN_FLIGHT:
        return _after(call, prev, lifecycle.in_flight(prev, plan, backend=backend,
                                                      cluster=cluster), again)
    if result.answer is SubmitAnswer.REFUSED:
        new = lifecycle.refused(prev, plan, backend=backend, cluster=cluster,
                                message=result.message)
        return _after(call, prev, new, again)
    if result.answer is SubmitAnswer.TRANSIENT:
        trouble = Trouble(Reason.CLUSTER_UNREACHABLE,
                          f"The scheduler did not take the submission ({result.message}); "
                          "it is retried once the attempt's guard expires.")
        return _unreachable(call, prev, plan, where, trouble)
    tasks = call.rules[backend].expected_tasks(job.spec.options, result.job_id)
    new = lifecycle.submitted(prev, plan, backend=backend, cluster=cluster,
                              job_id=result.job_id, tasks=tasks,
                              now=response.format_time(call.now))
    notes = (f"submitted {call.namespace}/{call.name} attempt {plan.attempt} as {backend} "
             f"job {result.job_id}",) if result.answer is SubmitAnswer.SUBMITTED else ()
    ref = JobRef(job.key, result.job_id, tasks)
    return Step(where, creds, Track(ref), lambda _: _after(call, prev, new, again, notes))


def _observed(
    call: Call, prev: Status, plan: Plan, where: Placement, creds: Credentials, ref: JobRef,
    result: Sequence[TaskState] | Trouble, again: bool,
) -> Decision:
    if isinstance(result, Trouble):
        return _unreachable(call, prev, plan, where, result)
    submitted_at = response.parse_time(prev.submit_time) or call.now
    summary = aggregate.summarize(
        result,
        expected=ref.expected_tasks,
        single=len(ref.expected_tasks) == 1,
        seconds_since_submit=(call.now - submitted_at).total_seconds(),
    )
    spec = call.parsed.spec
    new = lifecycle.observed(prev, plan, summary, backend=where.backend,
                             generation=call.generation,
                             backoff_limit=spec.backoff_limit if spec else 0)
    if not new.finished:
        if call.parsed.error:
            new = replace(new, message=f"{new.message} The new spec is invalid: "
                                       f"{call.parsed.error}".strip())
        return _after(call, prev, new, again)
    forget = Step(where, creds, Forget(ref.key), lambda _: _after(call, prev, new, again))
    if spec is None or not spec.logs_follow:
        return forget
    # A following log Pod learns the end from the attempt's directory, not from the scheduler.
    # Writing it may fail like any command; the answer does not depend on it.
    ended = MarkEnded(attempt_dir(call.namespace, call.name, call.uid, plan.attempt),
                      str(new.phase))
    return Step(where, creds, ended, lambda _: forget)


def _after(
    call: Call, prev: Status, new: Status, again: bool, notes: Sequence[str] = ()
) -> Decision:
    """Answer with ``new``, or go on with the next attempt when an infrastructure failure
    ended this one within ``backoffLimit``. (After a spec edit the end stays visible, with its
    log Pod, and the next attempt follows on the next sync.)"""
    spec = call.parsed.spec
    if again and new.finished and not prev.finished and new.attempt_generation == call.generation:
        return _next(call, new, again=False)
    next_due = spec is not None and new.finished and lifecycle.plan(
        new, generation=call.generation, backoff_limit=spec.backoff_limit
    ).step is Planned.SUBMIT
    return answer.build(call, new, next_attempt_due=next_due, notes=notes)


def _unreachable(
    call: Call, prev: Status, plan: Plan, where: Placement, trouble: Trouble
) -> Decision:
    new = lifecycle.unreachable(prev, plan, trouble.reason, trouble.message,
                                backend=where.backend, cluster=where.cluster)
    return answer.build(call, new)


def attempt_placement(call: Call, prev: Status) -> Placement | None:
    """Where the current attempt was submitted: an edit of the spec's backend or cluster
    applies to the next attempt. Before the first submission, where the spec says."""
    placement = call.parsed.placement
    if prev.cluster is None:
        return placement
    if prev.backend in call.rules:
        return Placement(prev.backend, prev.cluster)
    return Placement(placement.backend, prev.cluster) if placement else None


def credentials(call: Call, cluster: ClusterRef) -> Credentials | Trouble:
    """The login from the Secret the cluster names, or why there is none. Pure: no I/O."""
    name = cluster.secret_name
    secret = call.secrets.get(name)
    if secret is None:
        return Trouble(Reason.SECRET_NOT_FOUND,
                       f"Secret {name!r} was not found in namespace {call.namespace}.")
    try:
        return parse_secret(secret, insecure_host_keys=cluster.insecure_skip_host_key_check)
    except SecretError as err:
        return Trouble(Reason.INVALID_SECRET, f"Secret {name!r}: {err}")


def _for_backend(call: Call, spec: Spec, backend: str) -> Spec:
    """The spec for a retried submission that stays on the scheduler it was first sent to
    after an edit changed ``spec.backend``: that scheduler's defaults for its own block."""
    if spec.backend == backend:
        return spec
    return replace(spec, backend=backend,
                   options=call.rules[backend].parse_options({}, Resources()))
