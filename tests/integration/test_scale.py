"""The shared SSH layer against the real test sshd (OpenSSH's default MaxSessions 10)."""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import pytest

from hooks.core.sites.secret import Credentials
from hooks.core.values.job import JobRef
from hooks.core.values.phases import Outcome, TaskState
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.schedulers.slurm.commands import job_name
from hooks.schedulers.slurm.scheduler import Slurm
from hooks.ssh import errors
from hooks.ssh.client import Remote, Target
from hooks.ssh.pool import Pool, PooledConnection
from hooks.status_cache import StatusCache
from tests.integration.conftest import Cluster
from tests.integration.test_slurm import new_keypair

pytestmark = pytest.mark.slurm


def credentials(cluster: Cluster, **override: str) -> Credentials:
    values = {"username": cluster.user, "private_key": cluster.key,
              "known_hosts": cluster.known_hosts, **override}
    return Credentials(**values)


def target(cluster: Cluster) -> Target:
    return Target(cluster.host, cluster.port)


def within(seconds: float) -> Deadline:
    return Deadline.after(seconds)


def new_pool(max_channels: int = 8) -> Pool:
    return Pool(Metrics(), max_channels=max_channels)


@contextmanager
def opened(conn: PooledConnection) -> Iterator[Remote]:
    """The cache's opener for a connection the test holds open already."""
    yield conn


def test_one_connection_serves_many_calls(slurm: Cluster) -> None:
    pool = new_pool()
    seen = set()

    def call(_: int) -> str:
        with pool.open(target(slurm), credentials(slurm), deadline=within(10)) as conn:
            seen.add(id(conn))
            return conn.run(["id", "-un"], deadline=within(10)).out.strip()

    with concurrent.futures.ThreadPoolExecutor(16) as workers:
        users = set(workers.map(call, range(100)))
    pool.close()
    assert users == {slurm.user}
    assert len(seen) == 1


def test_never_more_channels_than_the_limit(slurm: Cluster) -> None:
    pool = new_pool()
    program = 'date +%s.%N; sleep 0.3; date +%s.%N'
    with (pool.open(target(slurm), credentials(slurm), deadline=within(10)) as conn,
          concurrent.futures.ThreadPoolExecutor(40) as workers):
        runs = list(workers.map(
            lambda _: conn.run(["sh", "-c", program], deadline=within(30)), range(40)))
    pool.close()
    assert all(run.exit_status == 0 for run in runs)
    spans = [tuple(float(t) for t in run.out.split()) for run in runs]
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert 2 <= peak <= 8


class Counting(Slurm):
    def __init__(self) -> None:
        self.queries = 0
        self.lock = threading.Lock()

    def query(self, conn: Remote, refs: Sequence[JobRef], *, deadline: Deadline,
              whole_queue: bool = True) -> Mapping[str, Sequence[TaskState]]:
        with self.lock:
            self.queries += 1
        return super().query(conn, refs, deadline=deadline, whole_queue=whole_queue)


def test_concurrent_misses_run_one_scheduler_query(slurm: Cluster) -> None:
    pool, cache, backend = new_pool(), StatusCache(Metrics(), ttl=30), Counting()
    refs = [JobRef(f"no-such-attempt-{i}", None) for i in range(20)]
    with pool.open(target(slurm), credentials(slurm), deadline=within(10)) as conn:
        for ref in refs:
            cache.track(conn.credential_key, backend, ref)
        with concurrent.futures.ThreadPoolExecutor(20) as workers:
            answers = list(workers.map(
                lambda r: cache.lookup(conn.credential_key, backend, lambda _: opened(conn), r,
                                       deadline=within(20)), refs * 3))
    pool.close()
    assert backend.queries == 1
    assert all(answer == [] for answer in answers)


def test_a_restarted_server_answers_queued_attempts_from_one_listing(slurm: Cluster) -> None:
    """A fresh cache (the hook server restarted) tracks nothing; the first syncs of many
    queued attempts, arriving together, cost one squeue, not one query each."""
    pool, cache, backend = new_pool(), StatusCache(Metrics(), ttl=30), Counting()
    keys = [f"{uuid.uuid4()}-1" for _ in range(6)]
    with pool.open(target(slurm), credentials(slurm), deadline=within(10)) as conn:
        job_ids = []
        for key in keys:
            result = conn.run(["sbatch", "--parsable", "--hold", "--output=/dev/null",
                               f"--job-name={job_name(key)}", "--wrap=true"],
                              deadline=within(20))
            assert result.exit_status == 0, result.err
            job_ids.append(result.out.strip())
        try:
            refs = [JobRef(key, job_id, (job_id,))
                    for key, job_id in zip(keys, job_ids, strict=True)]
            with concurrent.futures.ThreadPoolExecutor(len(refs)) as workers:
                answers = list(workers.map(
                    lambda r: cache.lookup(conn.credential_key, backend, lambda _: opened(conn),
                                           r, deadline=within(20)), refs))
        finally:
            conn.run(["scancel", *job_ids], deadline=within(20))
    pool.close()
    assert backend.queries == 1
    assert [[(t.task_id, t.outcome) for t in answer] for answer in answers] == [
        [(job_id, Outcome.PENDING)] for job_id in job_ids
    ]


def test_different_credential_sets_never_share_a_connection(slurm: Cluster) -> None:
    pool = new_pool()
    good = credentials(slurm)
    other_known_hosts = credentials(slurm, known_hosts=slurm.known_hosts + "# same host\n")
    with (pool.open(target(slurm), good, deadline=within(10)) as first,
          pool.open(target(slurm), other_known_hosts, deadline=within(10)) as second):
        assert first is not second
        assert first.credential_key != second.credential_key
    wrong_key = credentials(slurm, private_key=new_keypair()[0])
    with pytest.raises(errors.AuthenticationFailed), \
            pool.open(target(slurm), wrong_key, deadline=within(10)):
        pass
    pool.close()
