"""The shared SSH layer against the real test sshd (OpenSSH's default MaxSessions 10)."""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from collections.abc import Mapping, Sequence

import pytest

from hooks.backends.slurm import SlurmBackend
from hooks.core.model import JobRef, Outcome, TaskState
from hooks.core.secret import Credentials
from hooks.pool import Pool
from hooks.ssh import errors
from hooks.ssh.client import Remote, Target
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


def test_one_connection_serves_many_calls(slurm: Cluster) -> None:
    pool = Pool(max_channels=8)
    seen = set()

    def call(_: int) -> str:
        with pool.open(target(slurm), credentials(slurm), timeout=10) as conn:
            seen.add(id(conn))
            return conn.run(["id", "-un"], timeout=10).out.strip()

    with concurrent.futures.ThreadPoolExecutor(16) as workers:
        users = set(workers.map(call, range(100)))
    pool.close()
    assert users == {slurm.user}
    assert len(seen) == 1


def test_never_more_channels_than_the_limit(slurm: Cluster) -> None:
    pool = Pool(max_channels=8)
    program = 'date +%s.%N; sleep 0.3; date +%s.%N'
    with (pool.open(target(slurm), credentials(slurm), timeout=10) as conn,
          concurrent.futures.ThreadPoolExecutor(40) as workers):
        runs = list(workers.map(
            lambda _: conn.run(["sh", "-c", program], timeout=30), range(40)))
    pool.close()
    assert all(run.exit_status == 0 for run in runs)
    spans = [tuple(float(t) for t in run.out.split()) for run in runs]
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert 2 <= peak <= 8


class Counting(SlurmBackend):
    def __init__(self) -> None:
        self.queries = 0
        self.lock = threading.Lock()

    def query(self, conn: Remote, refs: Sequence[JobRef], *, timeout: float,
              whole_queue: bool = True) -> Mapping[str, Sequence[TaskState]]:
        with self.lock:
            self.queries += 1
        return super().query(conn, refs, timeout=timeout, whole_queue=whole_queue)


def test_concurrent_misses_run_one_scheduler_query(slurm: Cluster) -> None:
    pool, cache, backend = Pool(), StatusCache(ttl=30), Counting()
    refs = [JobRef(f"no-such-attempt-{i}", None) for i in range(20)]
    with pool.open(target(slurm), credentials(slurm), timeout=10) as conn:
        for ref in refs:
            cache.track(conn.key, backend, ref)
        with concurrent.futures.ThreadPoolExecutor(20) as workers:
            answers = list(workers.map(
                lambda r: cache.lookup(conn.key, backend, conn, r, timeout=20), refs * 3))
    pool.close()
    assert backend.queries == 1
    assert all(answer == [] for answer in answers)


def test_a_restarted_server_answers_queued_attempts_from_one_listing(slurm: Cluster) -> None:
    """A fresh cache (the hook server restarted) tracks nothing; the first syncs of many
    queued attempts, arriving together, cost one squeue, not one query each."""
    pool, cache, backend = Pool(), StatusCache(ttl=30), Counting()
    keys = [f"{uuid.uuid4()}-1" for _ in range(6)]
    with pool.open(target(slurm), credentials(slurm), timeout=10) as conn:
        job_ids = []
        for key in keys:
            result = conn.run(["sbatch", "--parsable", "--hold", "--output=/dev/null",
                               f"--job-name={backend.job_name(key)}", "--wrap=true"], timeout=20)
            assert result.exit_status == 0, result.err
            job_ids.append(result.out.strip())
        try:
            refs = [JobRef(key, job_id, (job_id,))
                    for key, job_id in zip(keys, job_ids, strict=True)]
            with concurrent.futures.ThreadPoolExecutor(len(refs)) as workers:
                answers = list(workers.map(
                    lambda r: cache.lookup(conn.key, backend, conn, r, timeout=20), refs))
        finally:
            conn.run(["scancel", *job_ids], timeout=20)
    pool.close()
    assert backend.queries == 1
    assert [[(t.task_id, t.outcome) for t in answer] for answer in answers] == [
        [(job_id, Outcome.PENDING)] for job_id in job_ids
    ]


def test_different_credential_sets_never_share_a_connection(slurm: Cluster) -> None:
    pool = Pool()
    good = credentials(slurm)
    other_known_hosts = credentials(slurm, known_hosts=slurm.known_hosts + "# same host\n")
    with (pool.open(target(slurm), good, timeout=10) as first,
          pool.open(target(slurm), other_known_hosts, timeout=10) as second):
        assert first is not second
        assert first.key != second.key
    wrong_key = credentials(slurm, private_key=new_keypair()[0])
    with pytest.raises(errors.AuthenticationFailed), \
            pool.open(target(slurm), wrong_key, timeout=10):
        pass
    pool.close()
