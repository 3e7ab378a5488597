"""A third scheduler, known only to this test, with a transport of its own (an in-memory queue,
no SSH): registered in a runtime beside the product's, it takes a BatchJob through submit,
status, the end of its tasks, cancellation (deletion and ``activeDeadlineSeconds``) and
finalize over the hooks' HTTP app, and its transport's failures become typed reasons. Nothing
in ``hooks/core`` or the executor knows it: this is what ``docs/schedulers.md`` promises a new
scheduler package."""

from __future__ import annotations

import base64
import datetime
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from hooks.app import create_app
from hooks.core.decide.effects import Access
from hooks.core.sites.batchcluster import SiteError, parse_site
from hooks.core.sites.routing import parse_routed
from hooks.core.values.fields import SpecError, line, whole_number
from hooks.core.values.job import (
    ClusterRef,
    JobRef,
    JobRequest,
    Resources,
    SubmitAnswer,
    SubmitOutcome,
)
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import QueueLimit
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.runtime import Runtime
from hooks.schedulers.base import TransportError
from hooks.schedulers.registry import REGISTRY
from hooks.settings import Settings
from tests.unit.builders import HOST_KEY
from tests.unit.conftest import IMAGE, NOW, UID


@dataclass
class Queue:
    """The cluster the test scheduler talks to: jobs by attempt key, and what was done."""

    jobs: dict[str, tuple[str, list[TaskState]]] = field(default_factory=dict)
    ended: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)

    def set_all(self, outcome: Outcome, **fields: Any) -> None:
        for _, tasks in self.jobs.values():
            tasks[:] = [TaskState(t.task_id, outcome, **fields) for t in tasks]


class QueueTransport:
    """A transport without a network: every route opens the one in-memory queue, unless
    ``refusal`` says why it cannot."""

    overrun = 0.0

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.queue = Queue()
        self.opened: list[str] = []
        self.refusal: TransportError | None = None

    def key(self, cluster: ClusterRef, access: Access) -> str:
        return f"{cluster.host}:{cluster.port}"

    @contextmanager
    def open(self, cluster: ClusterRef, access: Access, *, deadline: Deadline) -> Iterator[Queue]:
        self.opened.append(cluster.host)
        if self.refusal is not None:
            raise self.refusal
        yield self.queue

    def evict_idle(self, idle_seconds: float) -> int:
        return 0

    def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class ToyOptions:
    tasks: int = 1
    queue: str | None = None


class Toy:
    """The test's scheduler: ``spec.toy.tasks`` tasks per job, task ids ``t<n>/<i>``."""

    name = "toy"
    task_id_pattern = re.compile(r"(t[0-9]{1,9})(?:/[0-9]{1,2})?")
    queue_limit: QueueLimit | None = QueueLimit("queue", "queues")
    parallel_launcher: tuple[str, ...] = ()
    own_containers = False
    transport = QueueTransport

    def parse_options(self, raw: Mapping[str, Any], resources: Resources) -> ToyOptions:
        return ToyOptions(whole_number(raw.get("tasks", 1), "spec.toy.tasks", minimum=1,
                                       maximum=4), line(raw.get("queue"), "spec.toy.queue"))

    def expected_tasks(self, options: ToyOptions, job_id: str) -> tuple[str, ...]:
        return tuple(f"{job_id}/{i}" for i in range(options.tasks))

    def job_id(self, task_id: str) -> str:
        return task_id.split("/")[0]

    def writes_file(self, name: str) -> bool:
        return name == "toy.card" or name.endswith(".log")

    def free_form_settings(self, options: ToyOptions, script: str) -> tuple[tuple[str, str], ...]:
        return tuple((f"spec.script line {n}", "queue")
                     for n, text in enumerate(script.splitlines(), 1) if text.startswith("#Q "))

    def check_script(self, script: str) -> None:
        if "#TOY" in script:
            raise SpecError("spec.script may not hold #TOY lines: the toy scheduler owns them.")

    def submit(self, conn: Queue, job: JobRequest, *, deadline: Deadline) -> SubmitOutcome:
        if job.key in conn.jobs:
            return SubmitOutcome(SubmitAnswer.EXISTING, conn.jobs[job.key][0])
        job_id = f"t{len(conn.jobs) + 1}"
        tasks = [TaskState(t, Outcome.PENDING)
                 for t in self.expected_tasks(job.spec.options, job_id)]
        conn.jobs[job.key] = (job_id, tasks)
        return SubmitOutcome(SubmitAnswer.SUBMITTED, job_id)

    def query(
        self, conn: Queue, refs: Sequence[JobRef], *, deadline: Deadline,
        whole_queue: bool = True,
    ) -> Mapping[str, Sequence[TaskState]]:
        return {ref.key: list(conn.jobs.get(ref.key, ("", []))[1]) for ref in refs}

    def active_jobs(self, conn: Queue, uid: str, *, deadline: Deadline) -> Sequence[str]:
        return sorted(job_id for key, (job_id, tasks) in conn.jobs.items()
                      if key.startswith(f"{uid}-") and any(t.outcome.is_active for t in tasks))

    def cancel(self, conn: Queue, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        for job_id, tasks in conn.jobs.values():
            if job_id in job_ids:
                tasks[:] = [TaskState(t.task_id, Outcome.CANCELLED, Reason.CANCELLED_ON_CLUSTER)
                            for t in tasks]

    def hold(self, conn: Queue, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        conn.held += job_ids

    def release(self, conn: Queue, job_ids: Sequence[str], *, deadline: Deadline) -> None:
        conn.held = [j for j in conn.held if j not in job_ids]

    def mark_ended(self, conn: Queue, remote_dir: str, phase: str, *,
                   deadline: Deadline) -> None:
        conn.ended[remote_dir] = phase

    def remove_directory(self, conn: Queue, root: str, stale_seconds: int, *,
                         deadline: Deadline) -> str:
        conn.removed.append(root)
        return "removed"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Metacontroller:
    """Drives one BatchJob of backend ``toy`` through the hooks' HTTP app, each answer's
    status going into the next request."""

    def __init__(self, **spec: Any) -> None:
        self.now = NOW
        # No shared status kept between syncs: each sees the queue as the test left it.
        self.runtime = Runtime.build(Settings(log_image=IMAGE, status_ttl=1e-6),
                                     schedulers={**REGISTRY, "toy": Toy()}, clock=lambda: self.now)
        self.app = create_app(runtime=self.runtime).test_client()
        secret = {"metadata": {"name": "login", "namespace": "research"},
                  "data": {"username": b64("u"), "password": b64("p"),
                           "known_hosts": b64(f"queue.example.org {HOST_KEY}\n")}}
        self.body: dict[str, Any] = {
            "controller": {},
            "parent": {
                "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
                "metadata": {"name": "sim", "namespace": "research", "uid": UID,
                             "generation": 1},
                "spec": {"backend": "toy", "script": "#!/bin/sh\ntrue\n",
                         "cluster": {"host": "queue.example.org",
                                     "secretRef": {"name": "login"}},
                         "logs": {"follow": True}, **spec},
                "status": {},
            },
            "children": {"Pod.v1": {}},
            "related": {"Secret.v1": {"login": secret}},
            "finalizing": False,
        }

    @property
    def transport(self) -> QueueTransport:
        transport = self.runtime.transports[QueueTransport]
        assert isinstance(transport, QueueTransport)
        return transport

    def sync(self) -> dict[str, Any]:
        answer = self.app.post("/sync", json=self.body)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        body: dict[str, Any] = answer.get_json()
        self.body["parent"]["status"] = body["status"]
        return body


def test_a_third_scheduler_runs_a_batchjob_to_its_end_and_finalize() -> None:
    mc = Metacontroller(toy={"tasks": 2})
    queue = mc.transport.queue
    first = mc.sync()["status"]
    assert (first["phase"], first["backend"], first["jobIDs"]) == ("Pending", "toy",
                                                                     ["t1/0", "t1/1"])
    assert list(queue.jobs) == [f"{UID}-1"]
    queue.set_all(Outcome.RUNNING)
    assert mc.sync()["status"]["phase"] == "Running"
    queue.set_all(Outcome.SUCCEEDED, exit_code=0)
    done = mc.sync()["status"]
    assert (done["phase"], done["succeeded"]) == ("Succeeded", 2)
    assert list(queue.ended.values()) == ["Succeeded"]
    mc.body["finalizing"] = True
    assert mc.sync()["finalized"] is True
    assert len(queue.removed) == 1 and UID in queue.removed[0]
    assert set(mc.transport.opened) == {"queue.example.org"}
    assert len(queue.jobs) == 1  # submitted once, however many syncs


def test_deleting_a_running_batchjob_of_the_third_scheduler_cancels_it() -> None:
    mc = Metacontroller()
    queue = mc.transport.queue
    mc.sync()
    queue.set_all(Outcome.RUNNING)
    mc.sync()
    mc.body["finalizing"] = True
    first = mc.sync()
    assert (first["finalized"], first["status"]["reason"]) == (False, "Deleted")
    ((_, tasks),) = queue.jobs.values()
    assert [t.outcome for t in tasks] == [Outcome.CANCELLED]
    second = mc.sync()
    assert (second["finalized"], second["status"]["phase"]) == (True, "Cancelled")
    assert queue.removed


def test_the_deadline_of_a_batchjob_of_the_third_scheduler_cancels_it() -> None:
    mc = Metacontroller(activeDeadlineSeconds=60)
    queue = mc.transport.queue
    mc.sync()
    queue.set_all(Outcome.RUNNING)
    mc.sync()
    mc.now = NOW + datetime.timedelta(minutes=5)
    status = mc.sync()["status"]
    ((_, tasks),) = queue.jobs.values()
    assert [t.outcome for t in tasks] == [Outcome.CANCELLED]
    assert (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded")


def test_the_third_scheduler_validates_its_own_block_and_reserves_its_own_files() -> None:
    mc = Metacontroller(toy={"tasks": 9})
    status = mc.sync()["status"]
    assert (status["reason"], status["message"]) == (
        "InvalidSpec", "spec.toy.tasks must be at least 1 and at most 4, not 9.")
    mc = Metacontroller(inputs=[{"configMap": {"name": "c"},
                                 "items": [{"key": "k", "path": "toy.card"}]}])
    assert mc.sync()["status"]["reason"] == "InvalidSpec"
    assert not mc.transport.queue.jobs
    mc = Metacontroller(script="#!/bin/sh\n#TOY nodes=9\ntrue\n")
    status = mc.sync()["status"]
    assert (status["reason"], status["message"]) == (
        "InvalidSpec", "spec.script may not hold #TOY lines: the toy scheduler owns them.")
    assert not mc.transport.queue.jobs


def test_a_transport_that_fails_to_open_gives_the_batchjob_its_typed_reason() -> None:
    mc = Metacontroller()
    mc.transport.refusal = TransportError(Reason.AUTHENTICATION_FAILED,
                                          "The queue refused the login u.")
    status = mc.sync()["status"]
    assert (status["phase"], status["reason"], status["message"]) == (
        "Pending", "AuthenticationFailed", "The queue refused the login u.")
    assert not mc.transport.queue.jobs
    mc.transport.refusal = None
    mc.sync()
    mc.transport.refusal = TransportError(Reason.CLUSTER_UNREACHABLE, "The queue is away.")
    status = mc.sync()["status"]
    assert (status["phase"], status["jobIDs"]) == ("Pending", ["t1/0"])
    reachable = next(c for c in status["conditions"] if c["type"] == "ClusterReachable")
    assert (reachable["status"], reachable["reason"], reachable["message"]) == (
        "False", "ClusterUnreachable", "The queue is away.")


def toy_site(**limits: object) -> dict[str, Any]:
    return {"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchCluster",
            "metadata": {"name": "toy-site"},
            "spec": {"backend": "toy", "host": "toy.example.org",
                     "knownHosts": f"toy.example.org {HOST_KEY}\n",
                     "namespaceSelector": {}, "limits": limits}}


def test_the_third_schedulers_queues_are_limited_by_its_batchcluster_without_a_core_change(
) -> None:
    rules = {**REGISTRY, "toy": Toy()}
    site = toy_site(queues=["short", "long"])
    assert parse_site(site, rules).limits.queues == ("short", "long")

    def refusal(**toy: Any) -> str:
        spec = {"cluster": {"name": "toy-site", "secretRef": {"name": "login"}},
                "script": toy.pop("script", "#!/bin/sh\ntrue\n"), "toy": toy}
        parsed = parse_routed(spec, rules, sites={"toy-site": site},
                              namespace={"metadata": {"name": "research"}}, direct=False)
        return parsed.error

    assert refusal(queue="long") == ""
    assert refusal(queue="debug") == (
        "spec.toy.queue 'debug' is not allowed, and the BatchCluster's limits.queues are "
        "short, long (BatchCluster toy-site); change the spec.")
    assert refusal(queue="long", script="#!/bin/sh\n#Q debug\ntrue\n") == (
        "spec.script line 2 sets the queue, which the BatchCluster's limits.queues (a list) "
        "covers: set it in spec.toy.queue, where the limit is checked (BatchCluster toy-site); "
        "change the spec.")
    with pytest.raises(SiteError, match=r"spec.limits has 'partitions'; the backend's limits "
                                        r"are maxTimeLimit, .*, queues"):
        parse_site(toy_site(partitions=["short"]), rules)
