"""One sync through the service with a stand-in pool and backend: what it asks of the cluster
when an infrastructure failure ends an attempt (the test cluster cannot produce NODE_FAIL)."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from hooks import backends, metrics
from hooks.backends.base import SubmitOutcome, Submitted
from hooks.backends.slurm import SlurmBackend
from hooks.core.model import JobRef, JobRequest, Outcome, Reason, TaskState
from hooks.service import Hooks
from hooks.settings import Settings

NOW = datetime.datetime(2026, 11, 22, 10, 0, tzinfo=datetime.UTC)


class Conn:
    key = "pool-key"


class Pool:
    @contextmanager
    def open(self, target: object, credentials: object, *, timeout: float) -> Iterator[Conn]:
        yield Conn()


class NodeFailing(SlurmBackend):
    """Attempt 1 (job 500) ended with NODE_FAIL; submissions get job 501."""

    def __init__(self) -> None:
        self.submitted: list[JobRequest] = []

    def query(self, conn: Any, refs: Sequence[JobRef], *, timeout: float,
              whole_queue: bool = True) -> Mapping[str, Sequence[TaskState]]:
        return {ref.key: [TaskState("500", Outcome.FAILED, Reason.NODE_FAIL, "A node failed")]
                for ref in refs}

    def submit(self, conn: Any, job: JobRequest, *, timeout: float) -> SubmitOutcome:
        self.submitted.append(job)
        return SubmitOutcome(Submitted.NEW, job_id="501")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def request(backoff_limit: int, retries: int) -> dict[str, Any]:
    secret = {"metadata": {"name": "login", "namespace": "research"},
              "data": {"username": b64("u"), "password": b64("p"),
                       "known_hosts": b64("h ssh-ed25519 AAAA\n")}}
    return {
        "controller": {},
        "parent": {
            "metadata": {"name": "sim", "namespace": "research", "uid": "u-1", "generation": 1},
            "spec": {"backend": "slurm", "script": "#!/bin/sh\ntrue\n",
                     "cluster": {"host": "h", "secretRef": {"name": "login"}},
                     "backoffLimit": backoff_limit},
            "status": {"phase": "Running", "jobIDs": ["500"], "attempt": 1 + retries,
                       "attemptGeneration": 1, "retries": retries,
                       "submitTime": "2026-11-22T09:00:00Z"},
        },
        "children": {"Pod.v1": {}},
        "related": {"Secret.v1": {"login": secret}},
        "finalizing": False,
    }


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> NodeFailing:
    fake = NodeFailing()
    monkeypatch.setitem(backends.BACKENDS, "slurm", fake)
    return fake


def sync(body: dict[str, Any]) -> dict[str, Any]:
    hooks = Hooks(Settings(), pool=Pool(), clock=lambda: NOW)  # type: ignore[arg-type]
    status: dict[str, Any] = hooks.sync(body)["status"]
    return status


def test_node_failure_within_backoff_limit_resubmits_in_the_same_sync(
    backend: NodeFailing
) -> None:
    status = sync(request(backoff_limit=2, retries=0))
    assert [job.attempt for job in backend.submitted] == [2]
    assert (status["phase"], status["attempt"], status["retries"], status["jobIDs"]) == (
        "Pending", 2, 1, ["501"])


def test_node_failure_without_backoff_limit_fails(backend: NodeFailing) -> None:
    status = sync(request(backoff_limit=0, retries=0))
    assert backend.submitted == []
    assert (status["phase"], status["reason"]) == ("Failed", "NodeFail")


def test_last_retry_used_up_is_backoff_limit_exceeded(backend: NodeFailing) -> None:
    status = sync(request(backoff_limit=2, retries=2))
    assert backend.submitted == []
    assert (status["phase"], status["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert "resubmitted 2 time(s)" in status["message"]


class RecordingPool(Pool):
    def __init__(self) -> None:
        self.hosts: list[str] = []

    @contextmanager
    def open(self, target: Any, credentials: object, *, timeout: float) -> Iterator[Conn]:
        self.hosts.append(target.host)
        yield Conn()


class InFlight(NodeFailing):
    def submit(self, conn: Any, job: JobRequest, *, timeout: float) -> SubmitOutcome:
        self.submitted.append(job)
        return SubmitOutcome(Submitted.IN_FLIGHT)


def test_a_retried_submission_stays_on_the_cluster_it_was_first_sent_to(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(backends.BACKENDS, "slurm", InFlight())
    body = request(backoff_limit=0, retries=0)
    body["parent"]["status"] = {
        "phase": "Pending", "reason": "Submitting", "jobIDs": [], "attempt": 1,
        "attemptGeneration": 1,
        "cluster": {"host": "old-login", "port": 22, "secretRef": {"name": "login"},
                    "insecureSkipHostKeyCheck": False},
    }
    body["parent"]["metadata"]["generation"] = 2
    body["parent"]["spec"]["cluster"]["host"] = "new-login"
    pool = RecordingPool()
    hooks = Hooks(Settings(), pool=pool, clock=lambda: NOW)  # type: ignore[arg-type]
    status = hooks.sync(body)["status"]
    assert pool.hosts == ["old-login"]
    assert (status["attempt"], status["cluster"]["host"]) == (1, "old-login")


@pytest.mark.parametrize("spec_change", [
    pytest.param({"resources": {"memory": "1e400"}}, id="memory-overflow"),
    pytest.param({"backend": "htcondor", "htcondor": {"submitOptions": {"": "a\nb"}}},
                 id="empty-key-with-newline"),
])
def test_specs_the_crd_lets_through_are_invalid_not_errors(spec_change: dict[str, Any]) -> None:
    body = request(backoff_limit=0, retries=0)
    body["parent"]["status"] = {}
    body["parent"]["spec"].update(spec_change)
    pool = RecordingPool()
    status = Hooks(Settings(), pool=pool, clock=lambda: NOW).sync(body)["status"]  # type: ignore[arg-type]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec")
    assert pool.hosts == []


class Broken(NodeFailing):
    def active_jobs(self, conn: Any, uid: str, *, timeout: float) -> list[str]:
        raise RuntimeError("a bug")


@pytest.mark.parametrize(("minutes", "raises"), [
    pytest.param(1, True, id="within-the-grace-the-error-is-retried"),
    pytest.param(11, False, id="after-the-grace-deletion-goes-on"),
])
def test_a_finalize_bug_does_not_keep_a_deleted_batchjob_forever(
    monkeypatch: pytest.MonkeyPatch, minutes: int, raises: bool
) -> None:
    monkeypatch.setitem(backends.BACKENDS, "slurm", Broken())
    body = request(backoff_limit=0, retries=0)
    body["finalizing"] = True
    body["parent"]["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    later = NOW + datetime.timedelta(minutes=minutes)
    hooks = Hooks(Settings(), pool=Pool(), clock=lambda: later)  # type: ignore[arg-type]
    uid = body["parent"]["metadata"]["uid"]
    metrics.record_phase(uid, "Running")
    if raises:
        with pytest.raises(RuntimeError):
            hooks.sync(body)
        assert uid in metrics._phases
    else:
        assert hooks.sync(body)["finalized"] is True
        assert uid not in metrics._phases  # no longer counted among the BatchJobs by phase
