"""Whole hook calls through the executor with a stand-in scheduler that records what it was
asked: the main path (submit → track → Succeeded → finalize), deletion while running,
resubmission after an infrastructure failure, retries that stay where they were first sent,
specs the CRD lets through, and a finalize bug that must not keep a BatchJob forever."""

from __future__ import annotations

import base64
import copy
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from hooks.core.model import (
    JobRef,
    JobRequest,
    Outcome,
    Reason,
    SubmitAnswer,
    SubmitOutcome,
    TaskState,
)
from hooks.deadline import Deadline
from hooks.executor import Executor
from hooks.schedulers.shell import OverSSH
from hooks.schedulers.slurm.rules import SlurmRules
from hooks.ssh.client import Remote
from tests.unit.builders import HOST_KEY
from tests.unit.conftest import NOW, UID, FakeConnection, FakePool, completed, runtime


class RecordingSlurm(SlurmRules, OverSSH):
    """SLURM's pure rules with a cluster played by the test: each remote call is recorded
    (``asked``), jobs get ids from 500 on, and ``tasks`` says what the queue shows."""

    def __init__(self, answer: SubmitAnswer = SubmitAnswer.SUBMITTED) -> None:
        self.asked: list[str] = []
        self.submitted: list[JobRequest] = []
        self.answer = answer
        self.tasks: dict[str, list[TaskState]] = {}

    def submit(self, conn: Remote, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome:
        self.asked.append(f"submit {job.key}")
        self.submitted.append(job)
        job_id = str(500 + len(self.submitted) - 1)
        return SubmitOutcome(self.answer, job_id if self.answer is SubmitAnswer.SUBMITTED else "")

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        self.asked.append("query " + ",".join(ref.key for ref in refs))
        return {ref.key: self.tasks.get(ref.job_id or "", []) for ref in refs}

    def active_jobs(self, conn: Remote, uid: str, *, deadline: Deadline) -> Sequence[str]:
        self.asked.append(f"active_jobs {uid}")
        return sorted(job for job, tasks in self.tasks.items()
                      if any(t.outcome.is_active for t in tasks))

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        self.asked.append("cancel " + ",".join(job_ids))
        for job in job_ids:
            self.tasks[job] = [TaskState(job, Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER)]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def request(*, backoff_limit: int = 0, status: dict[str, Any] | None = None) -> dict[str, Any]:
    secret = {"metadata": {"name": "login", "namespace": "research"},
              "data": {"username": b64("u"), "password": b64("p"),
                       "known_hosts": b64(f"h {HOST_KEY}\n")}}
    return {
        "controller": {},
        "parent": {
            "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
            "metadata": {"name": "sim", "namespace": "research", "uid": UID, "generation": 1},
            "spec": {"backend": "slurm", "script": "#!/bin/sh\ntrue\n",
                     "cluster": {"host": "h", "secretRef": {"name": "login"}},
                     "backoffLimit": backoff_limit},
            "status": status or {},
        },
        "children": {"Pod.v1": {}},
        "related": {"Secret.v1": {"login": secret}},
        "finalizing": False,
    }


class Loop:
    """Metacontroller in miniature: each answer's status goes into the next request."""

    def __init__(self, scheduler: SlurmRules, body: dict[str, Any],
                 pool: FakePool | None = None) -> None:
        self.scheduler, self.body = scheduler, body
        self.pool = pool or FakePool()
        self.now = NOW

    def sync(self) -> dict[str, Any]:
        rt = runtime(self.pool, schedulers={"slurm": self.scheduler}, now=self.now)
        answer = Executor(rt).sync(copy.deepcopy(self.body))
        self.body["parent"]["status"] = answer["status"]
        return answer


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
    loop = Loop(slurm, request(backoff_limit=backoff_limit, status=failed_by_node(retries)))
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
