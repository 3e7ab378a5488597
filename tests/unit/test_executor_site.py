"""Whole sync calls through the executor for the site features, with a stand-in scheduler that
records what it was asked: the route to the login node through its jump hosts, hold and
release for spec.suspend (also while the shared status still shows the queue from before the
hold), the cancel of an attempt past spec.activeDeadlineSeconds, and the env
and input files handed to the submission."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from hooks.core.model import (
    JobRef,
    JobRequest,
    Outcome,
    Reason,
    SchedulerError,
    SubmitAnswer,
    SubmitOutcome,
    TaskState,
)
from hooks.deadline import Deadline
from hooks.executor import Executor
from hooks.schedulers.shell import OverSSH
from hooks.schedulers.slurm.rules import SlurmRules
from hooks.ssh.client import Remote, Target
from tests.unit import test_executor
from tests.unit.builders import LOGIN, config_map, login_secret, request, secret
from tests.unit.conftest import UID, FakeConnection, FakePool, runtime

SECRET_VALUE = "executor-secret-value"


class RecordingSlurm(SlurmRules, OverSSH):
    """SLURM's pure rules with a cluster played by the test: every remote call is recorded,
    jobs get ids from 500 on, ``tasks`` is what the queue shows, ``failing`` names the calls
    whose scheduler does not answer."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.submitted: list[JobRequest] = []
        self.tasks: dict[str, list[TaskState]] = {}
        self.failing: set[str] = set()

    def _ask(self, what: str, job_ids: Sequence[str] = ()) -> None:
        self.asked.append(" ".join([what, *job_ids]))
        if what in self.failing:
            raise SchedulerError(f"{what} failed: slurmctld is down")

    def submit(self, conn: Remote, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome:
        self._ask("submit")
        self.submitted.append(job)
        return SubmitOutcome(SubmitAnswer.SUBMITTED, str(500 + len(self.submitted) - 1))

    def query(
        self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        self._ask("query")
        return {ref.key: self.tasks.get(ref.job_id or "", []) for ref in refs}

    def active_jobs(self, conn: Remote, uid: str, *, deadline: Deadline) -> Sequence[str]:
        self._ask("active_jobs")
        return sorted(job for job, tasks in self.tasks.items()
                      if any(t.outcome.is_active for t in tasks))

    def cancel(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        self._ask("cancel", job_ids)
        for job in job_ids:
            self.tasks[job] = [TaskState(job, Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER)]

    def hold(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        self._ask("hold", job_ids)
        for job in job_ids:
            self.tasks[job] = [TaskState(job, Outcome.PENDING, Reason.HELD)]

    def release(self, conn: Remote, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        self._ask("release", job_ids)
        for job in job_ids:
            self.tasks[job] = [TaskState(job, Outcome.PENDING)]


class RoutePool(FakePool):
    """A stand-in pool that keeps every target it was asked to open, jump hosts included."""

    def __init__(self, conn: object = None) -> None:
        super().__init__(conn)
        self.targets: list[Target] = []

    @contextmanager
    def open(self, target: Target, credentials: object, *, deadline: Deadline) -> Iterator[Any]:
        self.targets.append(target)
        with super().open(target, credentials, deadline=deadline) as conn:
            yield conn


class Loop(test_executor.Loop):
    """The executor tests' Metacontroller in miniature, over a pool that keeps the targets it
    opened, and with spec edits."""

    def __init__(self, scheduler: RecordingSlurm, body: dict[str, Any],
                 pool: RoutePool | None = None) -> None:
        super().__init__(scheduler, body, pool or RoutePool())

    def edit(self, **fields: Any) -> None:
        self.body["parent"]["spec"].update(fields)
        self.body["parent"]["metadata"]["generation"] += 1


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
    assert slurm.asked == ["submit", "query", "hold 500", "query", "query", "release 500"]


class SharedLoop(Loop):
    """The loop over one runtime, whose shared status answers from what it saw up to ``ttl``
    seconds ago, as on a hook server."""

    def __init__(self, scheduler: RecordingSlurm, body: dict[str, Any], *, ttl: float) -> None:
        super().__init__(scheduler, body)
        self.runtime = runtime(self.pool, schedulers={"slurm": scheduler}, now=self.now,
                               status_ttl=ttl)

    def sync(self) -> dict[str, Any]:
        answer = Executor(self.runtime).sync(copy.deepcopy(self.body))
        self.body["parent"]["status"] = answer["status"]
        return answer


def test_resume_before_the_shared_status_shows_the_hold_releases_the_job() -> None:
    slurm = RecordingSlurm()
    slurm.tasks["500"] = [TaskState("500", Outcome.PENDING)]
    loop = SharedLoop(slurm, request(), ttl=60)
    loop.sync()
    loop.edit(suspend=True)
    assert loop.sync()["status"]["reason"] == "Suspended"
    loop.edit(suspend=False)
    released = loop.sync()["status"]
    assert (released["phase"], released["reason"]) == ("Pending", "")
    assert "released" in released["message"]
    assert slurm.asked == ["submit", "query", "hold 500", "release 500"]
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
    assert slurm.asked[-4:] == ["query", "hold 500", "query", "hold 500"]


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
    assert slurm.asked[-4:] == ["query", "release 500", "query", "release 500"]


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
    assert slurm.asked == ["submit", "query", "query", "cancel 500"]


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
                RoutePool(conn))
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
