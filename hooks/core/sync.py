"""The sync decision: what one sync of a BatchJob does, as steps for the shell to run.

``decide`` plans from the last status (``lifecycle.plan``) and answers at once when nothing
is due or the spec or Secret rules it out; otherwise it asks for one remote step — submit the
planned attempt, or look the current one up — and continues from its result. An attempt that
ended by an infrastructure failure within ``backoffLimit`` is resubmitted in the same sync, so
that the BatchJob does not flash Failed. ``spec.suspend`` keeps an attempt from being
submitted, or holds it while it waits in the queue; ``spec.activeDeadlineSeconds`` cancels it
once it has been on the cluster that long. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hooks.core import aggregate, answer, lifecycle, payload, response
from hooks.core.lifecycle import Plan
from hooks.core.lifecycle import Step as Planned
from hooks.core.model import (
    ClusterRef,
    JobRef,
    JobRequest,
    Phase,
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
from hooks.core.spec import Placement, digest
from hooks.core.status import Status
from hooks.core.steps import (
    Access,
    Cancel,
    Decision,
    Forget,
    Hold,
    MarkEnded,
    Query,
    Release,
    Step,
    Submit,
    Track,
    Trouble,
)


def decide(call: Call) -> Decision:
    """The first decision of a sync call. Pure: no I/O."""
    return _next(call, call.previous, again=True)


def generation(call: Call, prev: Status) -> int:
    """The spec's generation as attempts count it: an edit that leaves the attempt's digest
    as it was (``suspend``, ``activeDeadlineSeconds``) is no new spec."""
    if prev.spec_hash and prev.spec_hash == call.parsed.digest:
        return min(call.generation, prev.attempt_generation or call.generation)
    return call.generation


def _next(call: Call, prev: Status, *, again: bool) -> Decision:
    spec = call.parsed.spec
    plan = lifecycle.plan(prev, generation=generation(call, prev),
                          backoff_limit=spec.backoff_limit if spec else 0)
    if plan.step is Planned.IDLE:
        return answer.build(call, prev)
    same_attempt = plan.step is Planned.TRACK or plan.attempt == prev.attempt
    where = attempt_placement(call, prev) if same_attempt else call.parsed.placement
    if where is None or (spec is None and plan.step is Planned.SUBMIT):
        return answer.build(call, lifecycle.invalid_spec(prev, call.parsed.error,
                                                         backend=call.parsed.backend))
    if plan.step is Planned.SUBMIT:
        assert spec is not None
        if spec.suspend and not _tried(prev, plan):
            return answer.build(call, lifecycle.suspended(prev, plan, backend=where.backend))
    access = credentials(call, where.cluster)
    if isinstance(access, Trouble):
        return _unreachable(call, prev, plan, where, access)
    if plan.step is Planned.SUBMIT:
        assert spec is not None
        job = _job(call, spec, where, plan, prev)
        if not isinstance(job, JobRequest):
            return job
        return Step(where, access, Submit(job),
                    lambda result: _submitted(call, prev, plan, where, access, job, result, again))
    job_ids = prev.job_ids
    ref = JobRef(attempt_key(call.uid, plan.attempt),
                 call.rules[where.backend].job_id(job_ids[0]), job_ids)
    return Step(where, access, Query(ref),
                lambda result: _observed(call, prev, plan, where, access, ref, result, again))


def _tried(prev: Status, plan: Plan) -> bool:
    """Whether a submission of the planned attempt may have reached the cluster already (then
    it is completed, and the job held once it has an id). An attempt that waited, suspended
    or for a Secret or ConfigMap, was not sent by the last sync."""
    return prev.attempt == plan.attempt and prev.reason not in lifecycle.NOT_SENT


def _job(
    call: Call, spec: Spec, where: Placement, plan: Plan, prev: Status
) -> JobRequest | Decision:
    """The attempt to submit, with its env and input files; or the answer saying why the
    objects they come from cannot be read."""
    resolved = payload.resolve(spec, namespace=call.namespace, secrets=call.secrets,
                               config_maps=call.config_maps,
                               writes_file=call.rules[spec.backend].writes_file)
    if isinstance(resolved, payload.Unresolved):
        if resolved.reason is Reason.INVALID_SPEC:
            return answer.build(call, lifecycle.invalid_spec(prev, resolved.message,
                                                             backend=where.backend))
        return _unreachable(call, prev, plan, where, Trouble(resolved.reason, resolved.message))
    return JobRequest(call.namespace, call.name, call.uid, plan.attempt,
                      _for_attempt(call, spec, where), call.policy.guard_stale,
                      environment=resolved.environment, inputs=resolved.inputs)


def _submitted(
    call: Call, prev: Status, plan: Plan, where: Placement, access: Access,
    job: JobRequest, result: SubmitOutcome | Trouble, again: bool,
) -> Decision:
    if isinstance(result, Trouble):
        return _unreachable(call, prev, plan, where, result)
    backend, cluster = where.backend, where.cluster
    spec_hash = prev.spec_hash if prev.attempt == plan.attempt and prev.spec_hash else digest(
        job.spec)
    if result.answer is SubmitAnswer.IN_FLIGHT:
        new = lifecycle.in_flight(prev, plan, backend=backend, cluster=cluster)
        return _after(call, prev, replace(new, spec_hash=spec_hash), again)
    if result.answer is SubmitAnswer.REFUSED:
        new = lifecycle.refused(prev, plan, backend=backend, cluster=cluster,
                                message=result.message)
        return _after(call, prev, replace(new, spec_hash=spec_hash), again)
    if result.answer is SubmitAnswer.TRANSIENT:
        trouble = Trouble(Reason.CLUSTER_UNREACHABLE,
                          f"The scheduler did not take the submission ({result.message}); "
                          "it is retried once the attempt's guard expires.")
        return _unreachable(call, prev, plan, where, trouble)
    tasks = call.rules[backend].expected_tasks(job.spec.options, result.job_id)
    new = replace(lifecycle.submitted(prev, plan, backend=backend, cluster=cluster,
                                      job_id=result.job_id, tasks=tasks,
                                      now=response.format_time(call.now)),
                  spec_hash=spec_hash)
    notes = (f"submitted {call.namespace}/{call.name} attempt {plan.attempt} as {backend} "
             f"job {result.job_id}",) if result.answer is SubmitAnswer.SUBMITTED else ()
    ref = JobRef(job.key, result.job_id, tasks)
    return Step(where, access, Track(ref), lambda _: _after(call, prev, new, again, notes))


def _observed(
    call: Call, prev: Status, plan: Plan, where: Placement, access: Access, ref: JobRef,
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
                             generation=generation(call, prev),
                             backoff_limit=spec.backoff_limit if spec else 0)
    # Only jobs the scheduler showed under the attempt's name or key are held, released or
    # cancelled: the stored status (the ids expected but not visible yet) is anyone's to edit.
    jobs = tuple(sorted({call.rules[where.backend].job_id(task.task_id) for task in result}))
    limit = spec.active_deadline_seconds if spec else None
    if not new.finished and limit is not None and (
            call.now - submitted_at).total_seconds() >= limit:
        ended = lifecycle.deadline_exceeded(new, limit, jobs,
                                            now=response.format_time(call.now))
        if new.active == 0:  # nothing the scheduler shows is left to cancel
            return _ended(call, prev, plan, where, access, ref, ended, again)
        if not jobs:  # cancelled once the scheduler shows the attempt's jobs
            return _after(call, prev, new, again)
        return Step(where, access, Cancel(jobs),
                    lambda done: _ended(call, prev, plan, where, access, ref, ended, again)
                    if not isinstance(done, Trouble)
                    else _after(call, prev, lifecycle.unreachable(
                        new, plan, done.reason, done.message, backend=where.backend), again))
    if not new.finished:
        return _suspension(call, prev, plan, where, access, new, jobs, again)
    return _ended(call, prev, plan, where, access, ref, new, again)


def _suspension(
    call: Call, prev: Status, plan: Plan, where: Placement, access: Access, new: Status,
    jobs: tuple[str, ...], again: bool,
) -> Decision:
    """Hold a waiting attempt of a suspended BatchJob, release it once it is not. Until a
    release has worked the status stays ``Suspended`` (``lifecycle.held_by_hooks``), so that
    a failed one is tried again."""
    spec = call.parsed.spec
    held = new.phase is Phase.PENDING and new.reason is Reason.HELD
    ours = held and lifecycle.held_by_hooks(prev)
    if spec is None:
        # An invalid edit neither holds nor releases.
        kept = lifecycle.held(new, jobs) if ours else new
        return _after(call, prev, replace(kept, message=f"{kept.message} The new spec is "
                                                        f"invalid: {call.parsed.error}".strip()),
                      again)
    if spec.suspend and new.phase is Phase.RUNNING:
        return _after(call, prev, lifecycle.running_not_suspended(new), again)
    if spec.suspend and held:
        return _after(call, prev, lifecycle.held(new, jobs), again)
    if not jobs:  # not visible yet: held or released once the scheduler shows them
        kept = lifecycle.held(new, new.job_ids) if lifecycle.held_by_hooks(prev) else new
        return _after(call, prev, kept, again)
    if spec.suspend and new.phase is Phase.PENDING:
        return Step(where, access, Hold(jobs), lambda done: _after(
            call, prev, lifecycle.held(new, jobs) if not isinstance(done, Trouble)
            else lifecycle.unreachable(new, plan, done.reason, done.message,
                                       backend=where.backend), again))
    if ours:
        return Step(where, access, Release(jobs), lambda done: _after(
            call, prev, lifecycle.released(new, jobs) if not isinstance(done, Trouble)
            else replace(lifecycle.unreachable(new, plan, done.reason, done.message,
                                               backend=where.backend),
                         reason=Reason.SUSPENDED), again))
    return _after(call, prev, new, again)


def _ended(
    call: Call, prev: Status, plan: Plan, where: Placement, access: Access, ref: JobRef,
    new: Status, again: bool,
) -> Decision:
    """The attempt is over: it leaves the shared status, and its directory learns the end
    (``MarkEnded``): a following log Pod reads it there, and the env file goes. Writing it may
    fail like any command; the answer does not depend on it (finalize removes the directory
    in the end)."""
    forget = Step(where, access, Forget(ref.key), lambda _: _after(call, prev, new, again))
    spec = call.parsed.spec
    if spec is None or not (spec.logs_follow or spec.env):
        return forget
    ended = MarkEnded(attempt_dir(where.cluster.work_dir, call.namespace, call.name, call.uid,
                                  plan.attempt), str(new.phase))
    return Step(where, access, ended, lambda _: forget)


def _after(
    call: Call, prev: Status, new: Status, again: bool, notes: Sequence[str] = ()
) -> Decision:
    """Answer with ``new``, or go on with the next attempt when an infrastructure failure
    ended this one within ``backoffLimit``. (After a spec edit the end stays visible, with its
    log Pod, and the next attempt follows on the next sync.)"""
    spec = call.parsed.spec
    current = generation(call, prev)
    if again and new.finished and not prev.finished and new.attempt_generation == current:
        return _next(call, new, again=False)
    next_due = spec is not None and new.finished and lifecycle.plan(
        new, generation=current, backoff_limit=spec.backoff_limit
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


def credentials(call: Call, cluster: ClusterRef) -> Access | Trouble:
    """The logins of the route to the cluster (each jump host's, then the login node's) from
    the Secrets it names, or why there are none. Pure: no I/O."""
    login = _login(call, cluster.secret_name, cluster.insecure_skip_host_key_check, "")
    if isinstance(login, Trouble):
        return login
    hops: list[Credentials] = []
    for hop in cluster.jump:
        found = _login(call, hop.secret_name, hop.insecure_skip_host_key_check,
                       f" (jump host {hop.host})")
        if isinstance(found, Trouble):
            return found
        hops.append(found)
    return Access(login, tuple(hops))


def _login(call: Call, name: str, insecure: bool, role: str) -> Credentials | Trouble:
    secret = call.secrets.get(name)
    if secret is None:
        return Trouble(Reason.SECRET_NOT_FOUND,
                       f"Secret {name!r}{role} was not found in namespace {call.namespace}.")
    try:
        return parse_secret(secret, insecure_host_keys=insecure, now=call.now)
    except SecretError as err:
        return Trouble(Reason.INVALID_SECRET, f"Secret {name!r}{role}: {err}")


def _for_attempt(call: Call, spec: Spec, where: Placement) -> Spec:
    """The spec as the attempt is submitted: on the cluster (route, workDir) it was first sent
    to, and, after an edit changed ``spec.backend``, with that scheduler's defaults for its
    own block."""
    spec = replace(spec, cluster=where.cluster)
    if spec.backend == where.backend:
        return spec
    return replace(spec, backend=where.backend,
                   options=call.rules[where.backend].parse_options({}, Resources()))
