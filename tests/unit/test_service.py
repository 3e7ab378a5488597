"""One sync through the service with a stand-in pool and backend: what it asks of the cluster
when an infrastructure failure ends an attempt (the test cluster cannot produce NODE_FAIL)."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from hooks import backends
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

    def query(self, conn: Any, refs: Sequence[JobRef], *, timeout: float
              ) -> Mapping[str, Sequence[TaskState]]:
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
