"""Shares of the hook threads (hooks/admission.py) through whole hook calls: a namespace whose
BatchJobs name another namespace's healthy login node behind jump hosts that never answer (a
new port each time, so no remembered failure applies) holds only its own namespace's share, and
the victim's syncs run meanwhile; a call beyond a share is answered at once with its status
kept; calls that reach no cluster take no share."""

from __future__ import annotations

import concurrent.futures
import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hooks.admission import Admission
from hooks.core.decide.answer import BUSY_RESYNC
from hooks.core.values.phases import Outcome, TaskState
from hooks.deadline import Deadline
from hooks.executor import Executor
from hooks.ssh import errors
from hooks.ssh.client import Target
from tests.unit.builders import LOGIN, request
from tests.unit.conftest import FakePool, runtime
from tests.unit.server.test_executor import Loop, RecordingSlurm

ATTACKERS = 80
SHARE = 4
VICTIM = "login.victim.example"


class StallingJumpHosts(FakePool):
    """A pool whose jump hosts never answer: an open through one waits until ``release`` (or
    its deadline) and fails; a direct open answers at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.stalled = threading.Semaphore(0)

    @contextmanager
    def open(self, target: Target, credentials: object, *, deadline: Deadline) -> Iterator[Any]:
        if not target.jump:
            with super().open(target, credentials, deadline=deadline) as conn:
                yield conn
            return
        self.stalled.release()
        self.release.wait(deadline.left())
        raise errors.ClusterUnreachable(target.host, "the jump host did not answer")


def attack(number: int) -> dict[str, Any]:
    body = copy.deepcopy(request())
    body["parent"]["metadata"].update(namespace="attacker", name=f"a{number}",
                                      uid=f"00000000-0000-4000-8000-{number:012d}")
    body["related"]["Secret.v1"]["login"]["metadata"]["namespace"] = "attacker"
    body["parent"]["spec"]["cluster"].update(
        host=VICTIM, jump=[{"host": "bastion.attacker.example", "port": 2000 + number}])
    return body


def victim() -> dict[str, Any]:
    body = request()
    body["parent"]["spec"]["cluster"]["host"] = VICTIM
    return body


def test_a_namespace_stalling_routes_to_a_victims_login_node_leaves_its_syncs_running() -> None:
    pool, slurm = StallingJumpHosts(), RecordingSlurm()
    rt = runtime(pool, schedulers={"slurm": slurm}, cluster_threads=SHARE,
                 namespace_threads=SHARE)
    executor = Executor(rt)
    threads = concurrent.futures.ThreadPoolExecutor(rt.settings.threads)
    try:
        attacks = [threads.submit(executor.sync, attack(n)) for n in range(ATTACKERS)]
        for _ in range(SHARE):
            assert pool.stalled.acquire(timeout=30)
        answered = concurrent.futures.as_completed(attacks, timeout=30)
        busy = [next(answered).result() for _ in range(ATTACKERS - SHARE)]  # all but 4
        assert {answer["resyncAfterSeconds"] for answer in busy} == {BUSY_RESYNC}
        assert {answer["status"]["phase"] for answer in busy} == {"Pending"}
        assert not any(answer["status"].get("jobIDs") for answer in busy)

        for number in range(3):  # the victim's syncs run while the attack holds its share
            answer = threads.submit(executor.sync, victim()).result(timeout=30)
            assert answer["status"]["jobIDs"] == [str(500 + number)]
        assert sum(not f.done() for f in attacks) == SHARE
        assert slurm.asked == [f"submit {request()['parent']['metadata']['uid']}-1"] * 3
    finally:
        pool.release.set()
        threads.shutdown(wait=True)


def test_a_busy_answer_keeps_the_status_and_the_log_pod() -> None:
    slurm = RecordingSlurm()
    rt = runtime(schedulers={"slurm": slurm}, cluster_threads=1, namespace_threads=1)
    executor = Executor(rt)
    first = executor.sync(request())
    body = request(status=first["status"])
    body["children"]["Pod.v1"] = {pod["metadata"]["name"]: pod for pod in first["children"]}
    with rt.admission.slot((f"{LOGIN}:22",), "elsewhere"):  # the route's share is taken
        kept = executor.sync(copy.deepcopy(body))
    assert kept["status"] == first["status"]
    assert kept["children"] == first["children"]
    assert kept["resyncAfterSeconds"] == BUSY_RESYNC
    body["finalizing"] = True
    with rt.admission.slot(("other:22",), "research"):  # the namespace's share is taken
        deleting = executor.sync(copy.deepcopy(body))
    assert (deleting["finalized"], deleting["status"]) == (False, first["status"])
    assert slurm.asked == [f"submit {request()['parent']['metadata']['uid']}-1"]


def test_calls_that_reach_no_cluster_take_no_share() -> None:
    slurm = RecordingSlurm()
    loop = Loop(slurm, request())
    loop.sync()
    slurm.tasks["500"] = [TaskState("500", Outcome.SUCCEEDED, exit_code=0)]
    done = loop.sync()
    rt = runtime(schedulers={"slurm": slurm}, cluster_threads=1, namespace_threads=1)
    invalid = request()
    invalid["parent"]["spec"]["script"] = "no interpreter line"
    with rt.admission.slot(("h:22",), "research"):
        finished = Executor(rt).sync(copy.deepcopy(loop.body))
        refused = Executor(rt).sync(invalid)
    assert (finished["status"], "resyncAfterSeconds" in finished) == (done["status"], False)
    assert refused["status"]["reason"] == "InvalidSpec"


def test_shares_count_whole_routes_and_free_on_leaving() -> None:
    shares = Admission(route_share=1, namespace_share=2)
    with shares.slot(("jump:2200", "login:22"), "a") as first, \
            shares.slot(("login:22",), "b") as direct, \
            shares.slot(("jump:2200", "login:22"), "c") as same_route, \
            shares.slot(("jump:2201", "login:22"), "a") as other_route, \
            shares.slot(("jump:2202", "login:22"), "a") as third_of_a:
        assert (first, direct, same_route, other_route, third_of_a) == (
            True, True, False, True, False)
    with shares.slot(("jump:2200", "login:22"), "a") as again:
        assert again
