"""Metric labels stay within small fixed sets: the remote-command ``verb`` names the program,
never a path, a job's name or anything else that grows with the number of BatchJobs."""

from __future__ import annotations

import platform

import pytest
from prometheus_client import generate_latest

from hooks import __version__
from hooks.core.values.job import JobRef, JobRequest
from hooks.deadline import Deadline
from hooks.metrics import MAX_CLUSTERS, Metrics, verb
from hooks.schedulers import guard
from hooks.schedulers.base import Scheduler
from hooks.schedulers.registry import REGISTRY
from tests.unit.conftest import FakeConnection, completed, raw_spec, spec_of

VERBS = {"hpcbridge-submit", "hpcbridge-cleanup", "squeue", "sacct", "scancel", "condor_q",
         "condor_history", "condor_rm"}


def job(backend: str, namespace: str, name: str, uid: str) -> JobRequest:
    return JobRequest(namespace, name, uid, 1, spec_of(raw_spec(backend)), 120)


def verbs_of_a_life(scheduler: Scheduler, job: JobRequest) -> list[str]:
    """The verbs of every command one BatchJob's life sends: submit, track (the job has left
    the queue, so the accounting or history is asked too), cancel, remove its directory."""
    conn = FakeConnection({"hpcbridge-submit": [completed("submitted 4242\n")]})
    deadline = Deadline.after(10)
    scheduler.submit(conn, job, deadline=deadline)
    scheduler.query(conn, [JobRef(job.key, "4242", ("4242",))], deadline=deadline)
    scheduler.active_jobs(conn, job.uid, deadline=deadline)
    scheduler.cancel(conn, ["4242"], deadline=deadline)
    conn.run(guard.cleanup_command(root=job.remote_dir, stale_seconds=120), deadline=deadline)
    return [verb(argv) for argv, _ in conn.calls]


@pytest.mark.parametrize("scheduler", REGISTRY.values(), ids=list(REGISTRY))
def test_remote_command_verbs_do_not_depend_on_the_batchjob(scheduler: Scheduler) -> None:
    one = verbs_of_a_life(scheduler, job(scheduler.name, "research", "hello",
                                         "2b7e1f6a-5c3d-4e8f-9a0b-1c2d3e4f5a6b"))
    other = verbs_of_a_life(scheduler, job(scheduler.name, "physics", "sweep-17",
                                           "9c8d7e6f-1a2b-4c3d-8e9f-0a1b2c3d4e5f"))
    assert one == other
    assert set(one) <= VERBS, set(one) - VERBS


def test_each_server_has_its_own_registry_with_build_info() -> None:
    first, second = Metrics(), Metrics()
    first.submission("refused")
    assert first.registry.get_sample_value(
        "hpcbridge_submissions_total", {"outcome": "refused"}) == 1
    assert second.registry.get_sample_value(
        "hpcbridge_submissions_total", {"outcome": "refused"}) == 0
    assert first.registry.get_sample_value(
        "hpcbridge_build_info", {"version": __version__, "python": platform.python_version()}) == 1


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["squeue", "-h"], "squeue", id="plain"),
        pytest.param(["env", "TZ=UTC", "sacct", "-j", "1"], "sacct", id="env"),
        pytest.param(["env", "TZ=UTC", "sh", "-c", "x=1; exec squeue", "squeue"], "squeue",
                     id="env-sh"),
        pytest.param(["sh", "-c", "d=$HOME/$1; mkdir -p -- \"$d\"", "hpcbridge-submit",
                      ".hpcbridge/jobs/research/hello/1"], "hpcbridge-submit",
                     id="program-with-assignments"),
        pytest.param([], "?", id="empty"),
    ],
)
def test_verb(argv: list[str], expected: str) -> None:
    assert verb(argv) == expected


def test_cluster_labels_are_only_clusters_a_login_succeeded_on() -> None:
    metrics = Metrics()
    for i in range(3000):
        metrics.ssh_connect(f"host-{i}.example.org:22", ok=False)
        with metrics.remote_command(f"host-{i}.example.org:22", ["squeue"]):
            pass
    page = generate_latest(metrics.registry).decode()
    assert "host-" not in page
    assert 'hpcbridge_ssh_connects_total{cluster="unverified",outcome="failed"} 3000.0' in page
    metrics.ssh_connect("login.example.org:22", ok=True)
    with metrics.remote_command("login.example.org:22", ["squeue"]):
        pass
    assert metrics.registry.get_sample_value(
        "hpcbridge_remote_commands_total",
        {"cluster": "login.example.org:22", "verb": "squeue", "outcome": "ok"}) == 1


def test_at_most_max_clusters_get_a_label_of_their_own() -> None:
    metrics = Metrics()
    for i in range(MAX_CLUSTERS + 50):
        metrics.ssh_connect(f"host-{i}:22", ok=True)
    page = generate_latest(metrics.registry).decode()
    assert page.count("hpcbridge_ssh_connects_total{cluster=\"host-") == MAX_CLUSTERS


@pytest.mark.parametrize(("written", "label"), [
    (["127.0.0.1", "127.1", "127.0.0.01", "2130706433", "0x7f.0.0.1", "0177.0.0.1"],
     "127.0.0.1:22"),
    (["::1", "0:0:0:0:0:0:0:1", "0000::0001", "[::1]"], "[::1]:22"),
    (["::ffff:10.0.0.1", "10.0.1", "167772161"], "10.0.0.1:22"),
])
def test_an_address_is_one_cluster_label_however_it_is_written(
    written: list[str], label: str
) -> None:
    # 127.1, 127.0.0.01 and 2130706433 were three clusters.
    metrics = Metrics()
    for host in written:
        metrics.ssh_connect(f"{host}:22", ok=True)
        with metrics.remote_command(f"{host}:22", ["squeue"]):
            pass
    page = generate_latest(metrics.registry).decode()
    assert page.count("hpcbridge_ssh_connects_total{cluster=") == 1
    assert metrics.registry.get_sample_value(
        "hpcbridge_ssh_connects_total", {"cluster": label, "outcome": "ok"}) == len(written)
    assert metrics.registry.get_sample_value(
        "hpcbridge_remote_commands_total",
        {"cluster": label, "verb": "squeue", "outcome": "ok"}) == len(written)
    metrics.forget_cluster(f"{written[-1]}:22")
    assert f'cluster="{label}"' not in generate_latest(metrics.registry).decode()
