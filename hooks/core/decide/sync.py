"""The sync decision: what one sync of a BatchJob does, read top to bottom.

``decide`` is a generator: it yields each effect for the shell to run (submit the planned
attempt, or look the current one up, then hold, release or cancel its jobs), receives its
result and returns the answer. It plans from the last status (``lifecycle.plan``) and answers
at once when nothing is due or the spec or Secret rules it out. An attempt that ended by an
infrastructure failure within ``backoffLimit`` is resubmitted in the same sync, so that the
BatchJob does not flash Failed. ``spec.suspend`` keeps an attempt from being submitted, or
holds it while it waits in the queue (``hooks.core.decide.suspension``);
``spec.activeDeadlineSeconds`` cancels it once it has been on the cluster that long. Pure: no
I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hooks.core.decide import answer, staging, submission, suspension
from hooks.core.decide.effects import (
    Cancel,
    Decision,
    Effects,
    Forget,
    MarkEnded,
    Query,
    Trouble,
)
from hooks.core.decide.rounds import (
    Reached,
    Round,
    attempt_placement,
    credentials,
    generation,
)
from hooks.core.status import aggregate, dependencies, lifecycle, unsent
from hooks.core.status.lifecycle import Due, Plan
from hooks.core.status.record import Status
from hooks.core.values.job import (
    JobRef,
    Spec,
    attempt_dir,
    attempt_key,
)
from hooks.core.values.phases import TaskState
from hooks.core.wire import response
from hooks.core.wire.request import Call


def decide(call: Call) -> Decision:
    """One sync call: the effects it runs, then its answer. Pure: no I/O."""
    prev = call.previous
    reached = yield from _round(call, prev)
    if isinstance(reached, Reached) and _ended_for_a_retry(call, prev, reached.status):
        # The next attempt follows in the same sync, once.
        prev = reached.status
        reached = yield from _round(call, prev)
    if isinstance(reached, Status):
        return answer.build(call, reached)
    spec, new = call.parsed.spec, reached.status
    next_due = spec is not None and new.finished and lifecycle.plan(
        new, generation=generation(call, prev), backoff_limit=spec.backoff_limit
    ).due is Due.SUBMIT
    return answer.build(call, new, next_attempt_due=next_due, notes=reached.notes)


def _ended_for_a_retry(call: Call, prev: Status, new: Status) -> bool:
    """Whether this sync ended the attempt, so that the next one, if due, follows at once.
    (After a spec edit the end stays visible, with its log Pod, and the next attempt follows
    on the next sync.)"""
    return new.finished and not prev.finished and new.attempt_generation == generation(
        call, prev)


def _round(call: Call, prev: Status) -> Effects[Status | Reached]:
    """Submit the attempt due after ``prev``, or look the current one up; or the status to
    answer with at once, when nothing is due or the spec, the Secrets or ``spec.suspend`` rule
    it out."""
    spec = call.parsed.spec
    if lifecycle.collecting_outputs(prev):
        return staging.collected(call, prev)
    plan = lifecycle.plan(prev, generation=generation(call, prev),
                          backoff_limit=spec.backoff_limit if spec else 0)
    if plan.due is Due.IDLE:
        return prev
    same_attempt = plan.due is Due.TRACK or plan.attempt == prev.attempt
    where = attempt_placement(call, prev) if same_attempt else call.parsed.placement
    if where is None or (spec is None and plan.due is Due.SUBMIT):
        if call.parsed.reason in lifecycle.WAITING_FOR_SITE and plan.due is Due.SUBMIT:
            return lifecycle.unreachable(prev, plan, call.parsed.reason, call.parsed.error,
                                         backend=call.parsed.backend)
        return lifecycle.invalid_spec(prev, call.parsed.error, backend=call.parsed.backend)
    submit = spec if plan.due is Due.SUBMIT else None
    if submit is not None and submit.suspend and not _tried(prev, plan):
        return unsent.suspended(prev, plan, backend=where.backend)
    seen = prev.dependencies if plan.attempt == prev.attempt else ()
    if submit is not None and submit.depends_on and not _tried(prev, plan):
        gated = _dependencies(call, prev, plan, submit, where.backend)
        if isinstance(gated, Status):
            return gated
        seen = gated
    access = credentials(call, where.cluster)
    if isinstance(access, Trouble):
        return lifecycle.unreachable(prev, plan, access.reason, access.message,
                                     backend=where.backend, cluster=where.cluster)
    at = Round(call, prev, plan, where, access)
    if submit is not None:
        return _with_dependencies((yield from submission.submit(at, submit)), seen)
    return _with_dependencies((yield from _track(at)), seen)


def _dependencies(call: Call, prev: Status, plan: Plan, spec: Spec,
                  backend: str) -> tuple[dependencies.Seen, ...] | Status:
    """What the BatchJobs the attempt depends on were seen to be, when all reached their
    conditions; else the status that waits for them, or ends the attempt unsent."""
    mine = {name: obj for name, obj in call.batchjobs.items()
            if isinstance(obj.get("metadata"), dict)
            and obj["metadata"].get("namespace") == call.namespace}
    who = dependencies.Waiting(call.name, call.created, call.now, spec.dependency_grace_seconds)
    found = dependencies.gate(spec.depends_on, who, mine, prev.dependencies)
    if found.verdict is dependencies.Verdict.MET:
        return found.seen
    if found.verdict is dependencies.Verdict.CYCLE:
        return replace(lifecycle.invalid_spec(prev, found.message, backend=backend),
                       dependencies=found.seen)
    if found.verdict is dependencies.Verdict.FAILED:
        return unsent.dependency_failed(prev, plan, backend=backend, message=found.message,
                                           seen=found.seen)
    return unsent.waiting_for_dependencies(prev, plan, backend=backend,
                                              message=found.message, seen=found.seen)


def _with_dependencies(reached: Status | Reached,
                       seen: tuple[dependencies.Seen, ...]) -> Status | Reached:
    """``status.dependencies`` belongs to the attempt: what it saw when it was submitted stays
    with it."""
    if isinstance(reached, Reached):
        return replace(reached, status=replace(reached.status, dependencies=seen))
    return replace(reached, dependencies=seen)


def _tried(prev: Status, plan: Plan) -> bool:
    """Whether a submission of the planned attempt may have reached the cluster already (then
    it is completed, and the job held once it has an id). An attempt that waited, suspended
    or for a Secret or ConfigMap, was not sent by the last sync."""
    return prev.attempt == plan.attempt and prev.reason not in lifecycle.NOT_SENT


def _track(at: Round) -> Effects[Status | Reached]:
    """Look the attempt up; cancel it past its deadline, hold or release it as
    ``spec.suspend`` says, or record its end."""
    call, prev, backend = at.call, at.prev, at.where.backend
    ref = JobRef(attempt_key(call.uid, at.plan.attempt),
                 call.rules[backend].job_id(prev.job_ids[0]), prev.job_ids)
    tasks: Sequence[TaskState] | Trouble = yield at.effect(Query(ref))
    if isinstance(tasks, Trouble):
        return at.unreachable(tasks)
    new = _observed(at, ref, tasks)
    # Only jobs the scheduler showed under the attempt's name or key are held, released or
    # cancelled: the stored status (the ids expected but not visible yet) is anyone's to edit.
    jobs = tuple(sorted({call.rules[backend].job_id(task.task_id) for task in tasks}))
    spec = call.parsed.spec
    limit = spec.active_deadline_seconds if spec else None
    if not new.finished and limit is not None and _seconds_on_cluster(at) >= limit:
        return (yield from _past_deadline(at, ref, new, jobs, limit))
    if not new.finished:
        return Reached((yield from suspension.follow(at, new, jobs)))
    return (yield from _ended(at, ref, new))


def _observed(at: Round, ref: JobRef, tasks: Sequence[TaskState]) -> Status:
    """The attempt as the scheduler shows it."""
    call, spec = at.call, at.call.parsed.spec
    summary = aggregate.summarize(
        tasks,
        expected=ref.expected_tasks,
        single=len(ref.expected_tasks) == 1,
        seconds_since_submit=_seconds_on_cluster(at),
    )
    return replace(lifecycle.observed(at.prev, at.plan, summary, backend=at.where.backend,
                                      generation=generation(call, at.prev),
                                      backoff_limit=spec.backoff_limit if spec else 0),
                   inputs=at.prev.inputs)


def _seconds_on_cluster(at: Round) -> float:
    submitted_at = response.parse_time(at.prev.submit_time) or at.call.now
    return (at.call.now - submitted_at).total_seconds()


def _past_deadline(
    at: Round, ref: JobRef, new: Status, jobs: tuple[str, ...], limit: int
) -> Effects[Reached]:
    """``spec.activeDeadlineSeconds`` has passed: cancel the jobs the scheduler shows, then
    record the end. A cancel that fails is tried again by the next sync."""
    ended = lifecycle.deadline_exceeded(new, limit, jobs,
                                        now=response.format_time(at.call.now))
    if new.active == 0:  # nothing the scheduler shows is left to cancel
        return (yield from _ended(at, ref, ended))
    if not jobs:  # cancelled once the scheduler shows the attempt's jobs
        return Reached(new)
    done: Trouble | None = yield at.effect(Cancel(jobs))
    if isinstance(done, Trouble):
        return Reached(lifecycle.unreachable(new, at.plan, done.reason, done.message,
                                             backend=at.where.backend))
    return (yield from _ended(at, ref, ended))


def _ended(at: Round, ref: JobRef, new: Status) -> Effects[Reached]:
    """The attempt is over: its directory learns the end (``MarkEnded``): a following log Pod
    reads it there, and the env file goes; then it leaves the shared status. Writing the end
    may fail like any command; the answer does not depend on it (finalize removes the
    directory in the end). A spec that no longer reads (its BatchCluster deleted) does not say
    what the attempt needs, so its end is written then too."""
    call, spec = at.call, at.call.parsed.spec
    if spec is None or spec.logs_follow or spec.env or spec.outputs:
        yield at.effect(MarkEnded(attempt_dir(at.where.cluster.work_dir, call.namespace,
                                              call.name, call.uid, at.plan.attempt),
                                  str(new.phase)))
    yield at.effect(Forget(ref.key))
    return Reached(staging.ended(call, new))
