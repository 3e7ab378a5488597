"""The life of a BatchJob: plan() for every case, and the status each outcome of what is due
leads to (BatchJob API, "Life of a BatchJob" and the reasons table)."""

from __future__ import annotations

from dataclasses import replace
from typing import TypedDict, Unpack

import pytest

from hooks.core.status import lifecycle, unsent
from hooks.core.status.aggregate import summarize
from hooks.core.status.lifecycle import Due, Plan, plan
from hooks.core.status.record import Status, to_raw
from hooks.core.values.job import ClusterRef, JobRef
from hooks.core.values.phases import Outcome, Phase, TaskState
from hooks.core.values.reasons import Reason
from hooks.schedulers.slurm.states import SlurmRecord, to_task

CLUSTER = ClusterRef("login.hpc.example.org", 22, "hpc-login", False)

NOW = "2026-11-22T10:00:02Z"


class StatusFields(TypedDict, total=False):
    """The fields of a ``Status`` the tests set beyond its phase and reason."""

    job_ids: tuple[str, ...]
    attempt: int
    retries: int
    active: int
    failed: int
    exit_code: int | None
    message: str
    scheduler_reason: str
    submit_time: str | None
    start_time: str | None
    completion_time: str | None


def status(phase: Phase, reason: Reason = Reason.NONE, **fields: Unpack[StatusFields]) -> Status:
    """Attempt 1 of generation 1, SLURM job 4242 on a reachable cluster, then ``fields``."""
    submitted = Status(phase=phase, reason=reason, attempt=1, attempt_generation=1,
                       job_ids=("4242",), backend="slurm", reachable=True)
    return replace(submitted, **fields)


@pytest.mark.parametrize(
    ("prev", "generation", "backoff", "expected"),
    [
        pytest.param(Status(), 1, 0, Plan(Due.SUBMIT, 1, 1, 0), id="first-submit"),
        pytest.param(Status(), 4, 0, Plan(Due.SUBMIT, 1, 4, 0),
                     id="first-submit-from-current-generation"),
        pytest.param(Status(phase=Phase.FAILED, reason=Reason.INVALID_SPEC), 2, 0,
                     Plan(Due.SUBMIT, 1, 2, 0), id="never-submitted-invalid-spec-re-evaluates"),
        pytest.param(Status(reason=Reason.SECRET_NOT_FOUND, attempt=1, attempt_generation=1), 1,
                     0, Plan(Due.SUBMIT, 1, 1, 0), id="waiting-for-the-secret"),
        pytest.param(status(Phase.PENDING, job_ids=()), 1, 0, Plan(Due.SUBMIT, 1, 1, 0),
                     id="submitted-but-id-lost-is-looked-up-again"),
        pytest.param(status(Phase.PENDING, Reason.SUBMITTING, job_ids=()), 1, 0,
                     Plan(Due.SUBMIT, 1, 1, 0), id="in-flight"),
        pytest.param(status(Phase.PENDING), 1, 0, Plan(Due.TRACK, 1, 1, 0), id="track-pending"),
        pytest.param(status(Phase.RUNNING), 1, 0, Plan(Due.TRACK, 1, 1, 0), id="track-running"),
        pytest.param(status(Phase.UNKNOWN, Reason.UNKNOWN_STATE), 1, 0,
                     Plan(Due.TRACK, 1, 1, 0), id="track-unknown-state"),
        pytest.param(status(Phase.RUNNING, Reason.CLUSTER_UNREACHABLE), 1, 0,
                     Plan(Due.TRACK, 1, 1, 0), id="track-after-unreachable"),
        pytest.param(status(Phase.RUNNING), 2, 0, Plan(Due.TRACK, 1, 1, 0),
                     id="spec-change-waits-while-active"),
        pytest.param(status(Phase.SUCCEEDED), 2, 0, Plan(Due.SUBMIT, 2, 2, 0),
                     id="resubmit-on-spec-change-after-the-end"),
        pytest.param(status(Phase.FAILED, Reason.NODE_FAIL, retries=2), 2, 5,
                     Plan(Due.SUBMIT, 2, 2, 0), id="spec-change-counts-backoff-afresh"),
        pytest.param(status(Phase.UNKNOWN, Reason.JOB_NOT_FOUND), 2, 0,
                     Plan(Due.SUBMIT, 2, 2, 0), id="resubmit-lost-job-on-spec-change"),
        pytest.param(status(Phase.FAILED, Reason.NODE_FAIL), 1, 2, Plan(Due.SUBMIT, 2, 1, 1),
                     id="node-fail-within-backoff-limit"),
        pytest.param(status(Phase.FAILED, Reason.PREEMPTED, retries=1), 1, 2,
                     Plan(Due.SUBMIT, 2, 1, 2), id="preempted-within-backoff-limit"),
        pytest.param(status(Phase.FAILED, Reason.BOOT_FAIL, attempt=3, retries=2), 1, 2,
                     Plan(Due.IDLE, 3, 1, 2), id="backoff-limit-used-up"),
        pytest.param(status(Phase.FAILED, Reason.NODE_FAIL), 1, 0, Plan(Due.IDLE, 1, 1, 0),
                     id="node-fail-without-backoff-limit"),
        pytest.param(status(Phase.FAILED, Reason.BACKOFF_LIMIT_EXCEEDED, retries=2), 1, 2,
                     Plan(Due.IDLE, 1, 1, 2), id="backoff-limit-exceeded-is-final"),
        pytest.param(status(Phase.FAILED, Reason.NON_ZERO_EXIT_CODE), 1, 3,
                     Plan(Due.IDLE, 1, 1, 0), id="job-failure-is-not-retried"),
        pytest.param(status(Phase.FAILED, Reason.TIMEOUT), 1, 3, Plan(Due.IDLE, 1, 1, 0),
                     id="timeout-is-not-retried"),
        pytest.param(status(Phase.FAILED, Reason.OUT_OF_MEMORY), 1, 3, Plan(Due.IDLE, 1, 1, 0),
                     id="oom-is-not-retried"),
        pytest.param(status(Phase.FAILED, Reason.SUBMIT_FAILED, job_ids=()), 1, 3,
                     Plan(Due.IDLE, 1, 1, 0), id="refused-submission-is-final"),
        pytest.param(status(Phase.SUCCEEDED), 1, 0, Plan(Due.IDLE, 1, 1, 0),
                     id="idle-when-succeeded"),
        pytest.param(status(Phase.CANCELLED, Reason.CANCELLED_ON_CLUSTER), 1, 0,
                     Plan(Due.IDLE, 1, 1, 0), id="idle-when-cancelled"),
        pytest.param(status(Phase.UNKNOWN, Reason.JOB_NOT_FOUND), 1, 0,
                     Plan(Due.TRACK, 1, 1, 0), id="lost-is-still-looked-for"),
        pytest.param(status(Phase.UNKNOWN, Reason.JOB_NOT_FOUND), 2, 0,
                     Plan(Due.SUBMIT, 2, 2, 0), id="lost-then-spec-changed"),
    ],
)
def test_plan(prev: Status, generation: int, backoff: int, expected: Plan) -> None:
    assert plan(prev, generation=generation, backoff_limit=backoff) == expected


def test_submitted() -> None:
    new = lifecycle.submitted(Status(), Plan(Due.SUBMIT, 1, 3, 0), backend="slurm",
                              cluster=CLUSTER, job=JobRef("k", "4242", ("4242",)), now=NOW)
    assert new.cluster == CLUSTER
    assert (new.phase, new.reason, new.job_ids, new.attempt, new.attempt_generation) == (
        Phase.PENDING, Reason.NONE, ("4242",), 1, 3
    )
    assert (new.active, new.submit_time, new.reachable) == (1, NOW, True)


def test_a_new_attempt_starts_from_a_clean_status() -> None:
    prev = status(Phase.FAILED, Reason.NODE_FAIL, failed=1, exit_code=0,
                  completion_time="2026-11-22T09:00:00Z", start_time="2026-11-22T08:00:00Z")
    new = lifecycle.submitted(prev, Plan(Due.SUBMIT, 2, 1, 1), backend="slurm", cluster=CLUSTER,
                              job=JobRef("k", "4300", ("4300",)), now=NOW)
    assert (new.attempt, new.retries, new.job_ids, new.failed, new.exit_code) == (
        2, 1, ("4300",), 0, None
    )
    assert (new.start_time, new.completion_time) == (None, None)


def test_in_flight() -> None:
    new = lifecycle.in_flight(Status(), Plan(Due.SUBMIT, 1, 1, 0), backend="slurm",
                              cluster=CLUSTER)
    assert (new.phase, new.reason, new.job_ids) == (Phase.PENDING, Reason.SUBMITTING, ())


def test_refused() -> None:
    new = lifecycle.refused(Status(), Plan(Due.SUBMIT, 1, 1, 0), backend="slurm", cluster=CLUSTER,
                            message="sbatch: error: Invalid partition name specified")
    assert (new.phase, new.reason, new.active) == (Phase.FAILED, Reason.SUBMIT_FAILED, 0)
    assert new.message.endswith("sbatch: error: Invalid partition name specified")
    assert new.finished


def observe(prev: Status, p: Plan, tasks: list[TaskState], *, generation: int = 1,
            backoff: int = 0) -> Status:
    summary = summarize(tasks, expected=[t.task_id for t in tasks], single=len(tasks) == 1,
                        seconds_since_submit=30)
    return lifecycle.observed(prev, p, summary, backend="slurm", generation=generation,
                              backoff_limit=backoff)


def test_observed_running() -> None:
    prev = status(Phase.PENDING, submit_time=NOW)
    new = observe(prev, Plan(Due.TRACK, 1, 1, 0),
                  [TaskState("4242", Outcome.RUNNING, start_time="2026-11-22T10:00:05Z")])
    assert (new.phase, new.active, new.submit_time, new.start_time) == (
        Phase.RUNNING, 1, NOW, "2026-11-22T10:00:05Z"
    )


def queued(reason: str) -> TaskState:
    """A pending SLURM job as squeue gives it, through the SLURM mapping."""
    return to_task(SlurmRecord("4242", "PENDING", reason, "", "2026-11-22T10:00:01", "N/A",
                               "N/A", "debug"))


def render(new: Status) -> dict[str, object]:
    return to_raw(new, previous={}, now=NOW)


def test_the_first_look_up_of_a_queued_job_says_what_its_submission_said() -> None:
    """No write between the submission and the sync after it."""
    submitted = lifecycle.submitted(Status(), Plan(Due.SUBMIT, 1, 1, 0), backend="slurm",
                                    cluster=CLUSTER, job=JobRef("k", "4242", ("4242",)), now=NOW)
    seen = observe(submitted, Plan(Due.TRACK, 1, 1, 0), [queued("None")])
    assert render(seen) == render(submitted)


def test_ordinary_queueing_keeps_the_first_word_the_scheduler_gave() -> None:
    """Priority and Resources alternate as the queue moves: the first one stays, one write."""
    p = Plan(Due.TRACK, 1, 1, 0)
    first = observe(status(Phase.PENDING, message=lifecycle.QUEUED), p, [queued("Priority")])
    assert (first.scheduler_reason, first.message) == (
        "Priority", "SLURM queues it behind jobs of higher priority (Priority).")
    for word in ("Resources", "None", "Priority"):
        assert render(observe(first, p, [queued(word)])) == render(first)


@pytest.mark.parametrize(("word", "reason"), [
    ("QOSMaxJobsPerUserLimit", Reason.LIMIT_REACHED),
    ("Dependency", Reason.WAITING_FOR_DEPENDENCY),
    ("PartitionTimeLimit", Reason.UNSCHEDULABLE),
])
def test_a_reason_of_another_kind_is_shown_at_once(word: str, reason: Reason) -> None:
    prev = status(Phase.PENDING, message="SLURM queues it behind jobs of higher priority "
                  "(Priority).", scheduler_reason="Priority")
    new = observe(prev, Plan(Due.TRACK, 1, 1, 0), [queued(word)])
    assert (new.reason, new.scheduler_reason) == (reason, word)


def test_back_to_ordinary_queueing_shows_the_word_again() -> None:
    prev = status(Phase.PENDING, Reason.LIMIT_REACHED, scheduler_reason="QOSMaxJobsPerUserLimit")
    new = observe(prev, Plan(Due.TRACK, 1, 1, 0), [queued("Priority")])
    assert (new.reason, new.scheduler_reason) == (Reason.NONE, "Priority")


def test_observed_while_the_spec_changed_says_the_change_waits() -> None:
    new = observe(status(Phase.RUNNING), Plan(Due.TRACK, 1, 1, 0),
                  [TaskState("4242", Outcome.RUNNING)], generation=2)
    assert new.phase is Phase.RUNNING
    assert new.attempt_generation == 1
    assert "generation 2" in new.message and "waits for the end" in new.message


def test_observed_after_the_end_with_a_changed_spec_does_not_say_it_waits() -> None:
    new = observe(status(Phase.RUNNING), Plan(Due.TRACK, 1, 1, 0),
                  [TaskState("4242", Outcome.SUCCEEDED, exit_code=0)], generation=2)
    assert "waits" not in new.message


@pytest.mark.parametrize(
    ("retries", "backoff", "reason", "then"),
    [
        pytest.param(0, 0, Reason.NODE_FAIL, Due.IDLE, id="no-backoff-limit"),
        pytest.param(0, 2, Reason.NODE_FAIL, Due.SUBMIT, id="retries-left"),
        pytest.param(1, 2, Reason.NODE_FAIL, Due.SUBMIT, id="one-retry-left"),
        pytest.param(2, 2, Reason.BACKOFF_LIMIT_EXCEEDED, Due.IDLE, id="used-up"),
    ],
)
def test_a_node_failure_is_retried_within_the_backoff_limit(
    retries: int, backoff: int, reason: Reason, then: Due
) -> None:
    new = observe(status(Phase.RUNNING, retries=retries), Plan(Due.TRACK, 1, 1, retries),
                  [TaskState("4242", Outcome.FAILED, Reason.NODE_FAIL, "A node of the job failed",
                             exit_code=0)], backoff=backoff)
    assert (new.phase, new.reason) == (Phase.FAILED, reason)
    assert ("backoffLimit" in new.message) is (reason is Reason.BACKOFF_LIMIT_EXCEEDED)
    assert plan(new, generation=1, backoff_limit=backoff).due is then


@pytest.mark.parametrize(
    "prev",
    [
        pytest.param(status(Phase.RUNNING, start_time="2026-11-22T10:00:05Z"), id="running"),
        pytest.param(status(Phase.PENDING, Reason.HELD, message="held"), id="held"),
        pytest.param(status(Phase.UNKNOWN, Reason.UNKNOWN_STATE), id="unknown"),
    ],
)
def test_unreachable_while_tracking_keeps_the_last_known_phase(prev: Status) -> None:
    new = lifecycle.unreachable(prev, Plan(Due.TRACK, 1, 1, 0), Reason.CLUSTER_UNREACHABLE,
                                "Connection refused.", backend="slurm")
    assert (new.phase, new.job_ids, new.start_time, new.attempt) == (
        prev.phase, prev.job_ids, prev.start_time, prev.attempt
    )
    assert (new.reason, new.message) == (Reason.CLUSTER_UNREACHABLE, "Connection refused.")
    assert (new.reachable, new.reachability_reason) == (False, "ClusterUnreachable")


def test_unreachable_after_the_end_keeps_the_final_status() -> None:
    prev = status(Phase.SUCCEEDED, message="The job completed.", exit_code=0)
    new = lifecycle.unreachable(prev, Plan(Due.TRACK, 1, 1, 0), Reason.CLUSTER_UNREACHABLE,
                                "Connection refused.", backend="slurm")
    assert replace(new, reachable=True, reachability_reason="", reachability_message="") == prev
    assert new.reachable is False


@pytest.mark.parametrize(
    "reason",
    [Reason.SECRET_NOT_FOUND, Reason.INVALID_SECRET, Reason.HOST_KEY_MISMATCH,
     Reason.AUTHENTICATION_FAILED, Reason.CLUSTER_UNREACHABLE],
)
def test_unreachable_before_submission_waits_in_pending(reason: Reason) -> None:
    new = lifecycle.unreachable(Status(), Plan(Due.SUBMIT, 1, 1, 0), reason, "Why.",
                                backend="slurm")
    assert (new.phase, new.reason, new.message, new.job_ids) == (Phase.PENDING, reason, "Why.",
                                                                 ())
    contacted = reason not in (Reason.SECRET_NOT_FOUND, Reason.INVALID_SECRET)
    assert new.reachable is (False if contacted else None)


def test_invalid_spec() -> None:
    new = lifecycle.invalid_spec(Status(), "spec.script must be a batch script starting with "
                                 '"#!".', backend="slurm")
    assert (new.phase, new.reason, new.active, new.backend) == (
        Phase.FAILED, Reason.INVALID_SPEC, 0, "slurm"
    )
    assert new.message.startswith("spec.script")


def test_cancelling_then_deleted() -> None:
    prev = status(Phase.RUNNING, active=1)
    asked = lifecycle.cancelling(prev, ["4242"])
    assert (asked.phase, asked.reason) == (Phase.RUNNING, Reason.DELETED)
    assert "4242" in asked.message
    done = lifecycle.deleted(asked)
    assert (done.phase, done.reason, done.active, done.cancelled) == (
        Phase.CANCELLED, Reason.DELETED, 0, 1)


def test_deleted_with_nothing_to_cancel_keeps_the_final_status() -> None:
    prev = status(Phase.SUCCEEDED)
    assert lifecycle.deleted(prev) == prev




HELD_BY_HOOKS = Status(reason=Reason.SUSPENDED, message="held", backend="slurm",
                       job_ids=("500",), attempt=1, attempt_generation=1, active=1)
TRACK = Plan(Due.TRACK, 1, 1, 0)


@pytest.mark.parametrize(
    ("status", "ours"),
    [
        pytest.param(HELD_BY_HOOKS, True, id="held-for-suspend"),
        pytest.param(replace(HELD_BY_HOOKS, job_ids=()), False, id="never-submitted"),
        pytest.param(replace(HELD_BY_HOOKS, phase=Phase.RUNNING), False,
                     id="suspended-by-the-scheduler"),
        pytest.param(replace(HELD_BY_HOOKS, reason=Reason.HELD), False, id="held-by-others"),
    ],
)
def test_held_by_hooks(status: Status, ours: bool) -> None:
    assert lifecycle.held_by_hooks(status) is ours


def test_unreachable_keeps_a_hold_of_the_hooks_and_says_why_beside_it() -> None:
    new = lifecycle.unreachable(HELD_BY_HOOKS, TRACK, Reason.CLUSTER_UNREACHABLE, "Down.",
                                backend="slurm")
    assert (new.reason, new.message) == (Reason.SUSPENDED, "held")
    assert (new.reachable, new.reachability_reason, new.reachability_message) == (
        False, "ClusterUnreachable", "Down.")
    other = lifecycle.unreachable(replace(HELD_BY_HOOKS, reason=Reason.HELD), TRACK,
                                  Reason.CLUSTER_UNREACHABLE, "Down.", backend="slurm")
    assert (other.reason, other.message) == (Reason.CLUSTER_UNREACHABLE, "Down.")


def test_deadline_exceeded_counts_the_active_tasks_as_cancelled() -> None:
    running_status = Status(phase=Phase.RUNNING, job_ids=("7_0", "7_1", "7_2"), attempt=1,
                            active=2, succeeded=1, cancelled=0)
    new = lifecycle.deadline_exceeded(running_status, 90, ["7"], now="2026-11-22T10:05:00Z")
    assert (new.phase, new.reason, new.active, new.succeeded, new.cancelled) == (
        Phase.FAILED, Reason.DEADLINE_EXCEEDED, 0, 1, 2)
    assert new.completion_time == "2026-11-22T10:05:00Z"
    assert new.finished
    assert new.message.endswith("(90 s); its job 7 was cancelled.")


@pytest.mark.parametrize(("active", "job_ids", "ended"), [
    (0, [], "none of its jobs was left to cancel."),
    (0, ["7"], "none of its jobs was left to cancel."),
    (2, ["7", "8"], "its jobs 7, 8 were cancelled."),
])
def test_deadline_exceeded_says_what_was_cancelled(
    active: int, job_ids: list[str], ended: str
) -> None:
    # With nothing to cancel it read "and was cancelled (job )."
    new = lifecycle.deadline_exceeded(Status(phase=Phase.RUNNING, attempt=1, active=active),
                                      90, job_ids, now="2026-11-22T10:05:00Z")
    assert new.message == ("The attempt was active longer than spec.activeDeadlineSeconds "
                           f"(90 s); {ended}")


def test_suspended_before_submission_keeps_the_attempts_cluster() -> None:
    prev = Status(reason=Reason.SECRET_NOT_FOUND, attempt=1, attempt_generation=1,
                  cluster=ClusterRef("h", 22, "s", False, work_dir="/w"))
    new = unsent.suspended(prev, Plan(Due.SUBMIT, 1, 1, 0), backend="slurm")
    assert (new.phase, new.reason, new.attempt, new.cluster) == (
        Phase.PENDING, Reason.SUSPENDED, 1, prev.cluster)
    assert "attempt 1" in new.message
