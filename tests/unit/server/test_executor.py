"""Whole hook calls through the executor with a stand-in scheduler that records what it was
asked: the main path (submit → track → Succeeded → finalize), deletion while running,
resubmission after an infrastructure failure, retries that stay where they were first sent,
specs the CRD lets through, a finalize bug that must not keep a BatchJob forever; the route to
the login node through its jump hosts, hold and release for spec.suspend (also while the shared
status still shows the queue from before the hold), the cancel of an attempt past
spec.activeDeadlineSeconds, and the env and input files handed to the submission."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from hooks.core.values.job import JobRef, JobRequest, SubmitAnswer, SubmitOutcome
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import SchedulerError
from hooks.deadline import Deadline
from hooks.executor import Executor
from hooks.runtime import Runtime
from hooks.schedulers.shell import OverSSH
from hooks.schedulers.slurm.rules import SlurmRules
from hooks.ssh.client import Remote
from tests.unit.builders import LOGIN, config_map, login_secret, request, secret
from tests.unit.conftest import NOW, UID, FakeConnection, FakePool, completed, runtime

SECRET_VALUE = "executor-secret-value"
SUBMIT, QUERY = f"submit {UID}-1", f"query {UID}-1"
"""What the stand-in scheduler records for the submission and the query of attempt 1."""


class RecordingSlurm(SlurmRules, OverSSH):
    """SLURM's pure rules with a cluster played by the test: each remote call is recorded
    (``asked``), jobs get ids from 500 on, ``tasks`` says what the queue shows, ``failing``
    names the calls whose scheduler does not answer."""

    def __init__(self, answer: SubmitAnswer = SubmitAnswer.SUBMITTED) -> None:
        self.asked: list[str] = []
        self.submitted: list[JobRequest] = []
        self.answer = answer
        self.tasks: dict[str, list[TaskState]] = {}
        self.failing: set[str] = set()

    def record(self, call: str, subject: str) -> None:
        self.asked.append(f"{call} {subject}")
        if call in self.failing:
            raise SchedulerError(f"{call} failed: slurmctld is down")

    def submit(self, conn: Remote, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome:
        self.record("submit", job.key)
        self.submitted.append(job)
        job_id = str(500 + len(self.submitted) - 1)
        return SubmitOutcome(self.answer, job_id if self.answer is SubmitAnswer.SUBMITTED else "")

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        self.record("query", ",".join(ref.key for ref in refs))
        return {ref.key: self.tasks.get(ref.job_id or "", []) for ref in refs}

    def active_jobs(self, conn: Remote, uid: str, *, deadline: Deadline) -> Sequence[str]:
        self.record("active_jobs", uid)
        return sorted(job for job, tasks in self.tasks.items()
                      if any(t.outcome.is_active for t in tasks))

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        self.record("cancel", ",".join(job_ids))
        for job in job_ids:
            self.tasks[job] = [TaskState(job, Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER)]

    def hold(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        self.record("hold", ",".join(job_ids))
        for job in job_ids:
            self.tasks[job] = [TaskState(job, Outcome.PENDING, Reason.HELD)]

    def release(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        self.record("release", ",".join(job_ids))
        for job in job_ids:
            self.tasks[job] = [TaskState(job, Outcome.PENDING)]


class Loop:
    """Metacontroller in miniature: each answer's status goes into the next request, and
    ``edit`` changes the spec as a user would. With ``status_ttl`` every call goes through one
    runtime, whose shared status answers from what it saw up to that many seconds ago, as on a
    hook server; without, each call gets a runtime of its own."""

    def __init__(self, scheduler: RecordingSlurm, body: dict[str, Any],
                 pool: FakePool | None = None, *, status_ttl: float | None = None) -> None:
        self.scheduler, self.body = scheduler, body
        self.pool = pool or FakePool()
        self.now = NOW
        self.shared: Runtime | None = None
        if status_ttl is not None:
            self.shared = runtime(self.pool, schedulers={"slurm": scheduler}, now=self.now,
                                  status_ttl=status_ttl)

    def sync(self) -> dict[str, Any]:
        rt = self.shared or runtime(self.pool, schedulers={"slurm": self.scheduler},
                                    now=self.now)
        answer = Executor(rt).sync(copy.deepcopy(self.body))
        self.body["parent"]["status"] = answer["status"]
        return answer

    def edit(self, **fields: Any) -> None:
        self.body["parent"]["spec"].update(fields)
        self.body["parent"]["metadata"]["generation"] += 1


def test_the_main_path_submit_track_succeed_finalize() -> None:
    slurm = RecordingSlurm()
    cleanup = FakeConnection({"hpcbridge-cleanup": [completed("removed\n")]})
    loop = Loop(slurm, request(), FakePool(cleanup))
    first = loop.sync()["status"]
    assert (first["phase"], first["attempt"], first["jobIDs"]) == ("Pending", 1, ["500"])
    slurm.tasks["500"] = [TaskState("500", Outcome.RUNNING)]
    assert loop.sync()["status"]["phase"] == "Running"
    slurm.tasks["500"] = [TaskState("500", Outcome.SUCCEEDED, exit_code=0)]
    done = loop.sync()
    assert (done["status"]["phase"], done["status"]["exitCode"]) == ("Succeeded", 0)
    assert [pod["metadata"]["name"] for pod in done["children"]] == ["sim-logs"]
    assert "resyncAfterSeconds" not in done
    assert loop.sync()["status"] == done["status"]  # finished: answered without the cluster
    loop.body["finalizing"] = True
    assert loop.sync()["finalized"] is True
    assert slurm.asked == [f"submit {UID}-1", f"query {UID}-1", f"query {UID}-1",
                           f"active_jobs {UID}"]
    assert [argv[3] for argv, _ in cleanup.calls] == ["hpcbridge-cleanup"]


def test_deleting_a_running_batchjob_cancels_then_cleans_up() -> None:
    slurm = RecordingSlurm()
    cleanup = FakeConnection({"hpcbridge-cleanup": [completed("removed\n")]})
    loop = Loop(slurm, request(), FakePool(cleanup))
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.RUNNING)]
    loop.sync()
    loop.body["finalizing"] = True
    first = loop.sync()
    assert (first["finalized"], first["status"]["reason"]) == (False, "Deleted")
    assert [pod["metadata"]["name"] for pod in first["children"]] == []
    second = loop.sync()
    assert (second["finalized"], second["status"]["phase"]) == (True, "Cancelled")
    assert slurm.asked[-3:] == [f"active_jobs {UID}", "cancel 500", f"active_jobs {UID}"]


def failed_by_node(retries: int) -> dict[str, Any]:
    return {"phase": "Running", "backend": "slurm", "jobIDs": ["500"], "attempt": 1 + retries,
            "attemptGeneration": 1, "retries": retries, "submitTime": "2026-11-22T09:00:00Z"}


def node_failure_sync(backoff_limit: int, retries: int) -> tuple[RecordingSlurm, dict[str, Any]]:
    slurm = RecordingSlurm()
    slurm.tasks["500"] = [TaskState("500", Outcome.FAILED, Reason.NODE_FAIL, "A node failed")]
    loop = Loop(slurm, request({"backoffLimit": backoff_limit}, status=failed_by_node(retries)))
    return slurm, loop.sync()["status"]


def test_node_failure_within_backoff_limit_resubmits_in_the_same_sync() -> None:
    slurm, status = node_failure_sync(backoff_limit=2, retries=0)
    assert [job.attempt for job in slurm.submitted] == [2]
    assert (status["phase"], status["attempt"], status["retries"], status["jobIDs"]) == (
        "Pending", 2, 1, ["500"])


def test_node_failure_without_backoff_limit_fails() -> None:
    slurm, status = node_failure_sync(backoff_limit=0, retries=0)
    assert slurm.submitted == []
    assert (status["phase"], status["reason"]) == ("Failed", "NodeFail")


def test_last_retry_used_up_is_backoff_limit_exceeded() -> None:
    slurm, status = node_failure_sync(backoff_limit=2, retries=2)
    assert slurm.submitted == []
    assert (status["phase"], status["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert "resubmitted 2 time(s)" in status["message"]


def test_a_retried_submission_stays_on_the_cluster_it_was_first_sent_to() -> None:
    slurm = RecordingSlurm(SubmitAnswer.IN_FLIGHT)
    body = request(status={
        "phase": "Pending", "reason": "Submitting", "jobIDs": [], "attempt": 1,
        "attemptGeneration": 1,
        "cluster": {"host": "old-login", "port": 22, "secretRef": {"name": "login"},
                    "insecureSkipHostKeyCheck": False},
    })
    body["parent"]["metadata"]["generation"] = 2
    body["parent"]["spec"]["cluster"]["host"] = "new-login"
    loop = Loop(slurm, body)
    status = loop.sync()["status"]
    assert loop.pool.hosts == ["old-login"]
    assert (status["attempt"], status["cluster"]["host"]) == (1, "old-login")


@pytest.mark.parametrize("spec_change", [
    pytest.param({"resources": {"memory": "1e400"}}, id="memory-overflow"),
    pytest.param({"backend": "htcondor", "htcondor": {"submitOptions": {"": "a\nb"}}},
                 id="empty-key-with-newline"),
])
def test_specs_the_crd_lets_through_are_invalid_not_errors(spec_change: dict[str, Any]) -> None:
    body = request()
    body["parent"]["spec"].update(spec_change)
    loop = Loop(RecordingSlurm(), body)
    status = loop.sync()["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec")
    assert loop.pool.hosts == []


class Broken(RecordingSlurm):
    def active_jobs(self, conn: Remote, uid: str, *, deadline: Deadline) -> Sequence[str]:
        raise RuntimeError("a bug")


@pytest.mark.parametrize(("minutes", "raises"), [
    pytest.param(1, True, id="within-the-grace-the-error-is-retried"),
    pytest.param(11, False, id="after-the-grace-deletion-goes-on"),
])
def test_a_finalize_bug_does_not_keep_a_deleted_batchjob_forever(
    minutes: int, raises: bool
) -> None:
    loop = Loop(Broken(), request(status=failed_by_node(0)))
    loop.body["finalizing"] = True
    loop.body["parent"]["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    loop.now = NOW + datetime.timedelta(minutes=minutes)
    if raises:
        with pytest.raises(RuntimeError):
            loop.sync()
    else:
        answer = loop.sync()
        assert (answer["finalized"], answer["status"]) == (True, failed_by_node(0))


def test_the_end_of_a_followed_attempt_is_written_for_its_log_pod() -> None:
    slurm = RecordingSlurm()
    conn = FakeConnection()
    body = request()
    body["parent"]["spec"]["logs"] = {"follow": True}
    loop = Loop(slurm, body, FakePool(conn))
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.RUNNING)]
    running = loop.sync()
    assert [pod["metadata"]["name"] for pod in running["children"]] == ["sim-logs"]
    assert conn.programs() == []
    slurm.tasks["500"] = [TaskState("500", Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE)]
    assert loop.sync()["status"]["phase"] == "Failed"
    (argv, _), = conn.calls
    assert argv[3:] == ["hpcbridge-mark-ended", f".hpcbridge/research/sim/{UID}/attempt-1",
                        "Failed"]
    loop.sync()
    assert len(conn.calls) == 1  # finished: not written again


def test_writing_the_end_may_fail_without_changing_the_answer() -> None:
    slurm = RecordingSlurm()
    body = request(status={"phase": "Running", "backend": "slurm", "jobIDs": ["500"], "attempt": 1,
                           "attemptGeneration": 1, "submitTime": "2026-11-22T09:00:00Z"})
    body["parent"]["spec"]["logs"] = {"follow": True}
    broken = FakeConnection({"hpcbridge-mark-ended": [completed(status=1)]})
    slurm.tasks["500"] = [TaskState("500", Outcome.SUCCEEDED, exit_code=0)]
    status = Loop(slurm, body, FakePool(broken)).sync()["status"]
    assert (status["phase"], status["reason"]) == ("Succeeded", "")


# --- the site features ---------------------------------------------------------------------------


def test_the_route_reaches_the_login_node_through_each_jump_host() -> None:
    slurm = RecordingSlurm()
    body = request({"cluster": {
        "host": LOGIN, "port": 2222, "secretRef": {"name": "login"},
        "jump": [{"host": "bastion.example.org"},
                 {"host": "inner.example.org", "port": 2200, "secretRef": {"name": "hop"},
                  "insecureSkipHostKeyCheck": True}]}},
        secrets={"hop": login_secret("[inner.example.org]:2200", username="hopper")})
    loop = Loop(slurm, body)
    assert loop.sync()["status"]["jobIDs"] == ["500"]
    (target,) = loop.pool.targets
    assert (target.host, target.port, target.insecure_skip_host_key_check) == (LOGIN, 2222,
                                                                               False)
    assert [(j.host, j.port, j.insecure_skip_host_key_check, j.credentials.username)
            for j in target.jump] == [("bastion.example.org", 22, False, "alice"),
                                      ("inner.example.org", 2200, True, "hopper")]


def test_suspend_holds_the_queued_job_and_resume_releases_it() -> None:
    slurm = RecordingSlurm()
    loop = Loop(slurm, request())
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.PENDING)]
    loop.edit(suspend=True)
    held = loop.sync()["status"]
    assert (held["phase"], held["reason"]) == ("Pending", "Suspended")
    assert loop.sync()["status"]["reason"] == "Suspended"
    loop.edit(suspend=False)
    released = loop.sync()["status"]
    assert (released["phase"], released["reason"]) == ("Pending", "")
    assert slurm.asked == [SUBMIT, QUERY, "hold 500", QUERY, QUERY, "release 500"]


def test_resume_before_the_shared_status_shows_the_hold_releases_the_job() -> None:
    slurm = RecordingSlurm()
    slurm.tasks["500"] = [TaskState("500", Outcome.PENDING)]
    loop = Loop(slurm, request(), status_ttl=60)
    loop.sync()
    loop.edit(suspend=True)
    assert loop.sync()["status"]["reason"] == "Suspended"
    loop.edit(suspend=False)
    released = loop.sync()["status"]
    assert (released["phase"], released["reason"]) == ("Pending", "")
    assert "released" in released["message"]
    assert slurm.asked == [SUBMIT, QUERY, "hold 500", "release 500"]
    assert slurm.tasks["500"] == [TaskState("500", Outcome.PENDING)]


def test_a_hold_the_scheduler_does_not_take_is_tried_again() -> None:
    slurm = RecordingSlurm()
    loop = Loop(slurm, request())
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.PENDING)]
    loop.edit(suspend=True)
    slurm.failing = {"hold"}
    status = loop.sync()["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "ClusterUnreachable")
    assert "slurmctld is down" in status["message"]
    slurm.failing = set()
    assert loop.sync()["status"]["reason"] == "Suspended"
    assert slurm.asked[-4:] == [QUERY, "hold 500", QUERY, "hold 500"]


def test_a_release_the_scheduler_does_not_take_is_tried_again() -> None:
    slurm = RecordingSlurm()
    loop = Loop(slurm, request())
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.PENDING)]
    loop.edit(suspend=True)
    loop.sync()
    loop.edit(suspend=False)
    slurm.failing = {"release"}
    assert loop.sync()["status"]["reason"] == "Suspended"
    slurm.failing = set()
    assert loop.sync()["status"]["reason"] == ""
    assert slurm.asked[-4:] == [QUERY, "release 500", QUERY, "release 500"]


def test_suspended_before_submission_touches_no_cluster() -> None:
    slurm = RecordingSlurm()
    loop = Loop(slurm, request({"suspend": True}))
    status = loop.sync()["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "Suspended")
    assert (slurm.asked, loop.pool.targets) == ([], [])


def test_the_deadline_cancels_the_attempt() -> None:
    slurm = RecordingSlurm()
    loop = Loop(slurm, request({"activeDeadlineSeconds": 600, "backoffLimit": 2}))
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.RUNNING)]
    loop.now += datetime.timedelta(seconds=599)
    assert loop.sync()["status"]["phase"] == "Running"
    loop.now += datetime.timedelta(seconds=1)
    done = loop.sync()
    assert (done["status"]["phase"], done["status"]["reason"]) == ("Failed", "DeadlineExceeded")
    assert [pod["metadata"]["name"] for pod in done["children"]] == ["sim-logs"]
    assert loop.sync()["status"] == done["status"]
    assert slurm.asked == [SUBMIT, QUERY, QUERY, "cancel 500"]


def test_a_cancel_the_scheduler_does_not_take_is_tried_again() -> None:
    slurm = RecordingSlurm()
    loop = Loop(slurm, request({"activeDeadlineSeconds": 60}))
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.RUNNING)]
    loop.now += datetime.timedelta(seconds=120)
    slurm.failing = {"cancel"}
    status = loop.sync()["status"]
    assert (status["phase"], status["reason"]) == ("Running", "ClusterUnreachable")
    slurm.failing = set()
    assert loop.sync()["status"]["reason"] == "DeadlineExceeded"


def test_the_end_past_the_deadline_is_marked_in_the_work_dir() -> None:
    slurm = RecordingSlurm()
    conn = FakeConnection()
    loop = Loop(slurm, request({"activeDeadlineSeconds": 60, "logs": {"follow": True},
                                "cluster": {"host": LOGIN, "secretRef": {"name": "login"},
                                            "workDir": "/scratch/alice"}}),
                FakePool(conn))
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.PENDING)]
    loop.now += datetime.timedelta(seconds=60)
    loop.sync()
    ((argv, _),) = conn.calls
    assert argv[3:] == ["hpcbridge-mark-ended",
                        f"/scratch/alice/research/sim/{UID}/attempt-1", "Failed"]


def test_the_submission_gets_the_env_and_input_files() -> None:
    slurm = RecordingSlurm()
    body = request({"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {
                        "name": "api", "key": "token"}}}],
                    "inputs": [{"configMap": {"name": "params"}}]},
                   secrets={"api": secret(token=SECRET_VALUE)},
                   config_maps={"params": config_map(**{"p.json": "{}"})})
    status = Loop(slurm, body).sync()["status"]
    (job,) = slurm.submitted
    assert job.environment == (("TOKEN", SECRET_VALUE),)
    assert [(f.path, f.content) for f in job.inputs] == [("p.json", b"{}")]
    assert SECRET_VALUE not in repr(status)


def test_a_missing_env_secret_touches_no_cluster() -> None:
    slurm = RecordingSlurm()
    body = request({"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {
        "name": "api", "key": "token"}}}]})
    loop = Loop(slurm, body)
    status = loop.sync()["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "SecretNotFound")
    assert (slurm.asked, loop.pool.targets) == ([], [])
