"""Remote commands per round with 1000 BatchJobs on the real SLURM cluster: one squeue while
they wait (their reasons included), and the same squeue plus one sacct per 500 jobs in the
round they all end (their accounting included): the reasons and the usage cost no command."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

from hooks.core.values.job import JobRef
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.schedulers.slurm.commands import SACCT_CHUNK
from hooks.schedulers.slurm.scheduler import Slurm
from hooks.ssh.client import Remote
from hooks.ssh.pool import Pool, PooledConnection
from hooks.status_cache import StatusCache
from tests.integration.conftest import Cluster
from tests.integration.test_scale import credentials, target
from tests.integration.test_slurm import wait_for

pytestmark = pytest.mark.slurm
COUNT = 1000


@contextmanager
def opened(conn: PooledConnection) -> Iterator[Remote]:
    yield conn


def commands(metrics: Metrics) -> dict[str, float]:
    found: dict[str, float] = {}
    for family in metrics.registry.collect():
        if family.name == "hpcbridge_remote_commands":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    verb = sample.labels["verb"]
                    found[verb] = found.get(verb, 0) + sample.value
    return found


def test_a_thousand_batchjobs_cost_one_squeue_and_end_with_one_sacct_per_chunk(
    slurm: Cluster
) -> None:
    metrics = Metrics()
    now = [0.0]
    pool, scheduler = Pool(metrics), Slurm()
    cache = StatusCache(metrics, ttl=5, clock=lambda: now[0])
    keys = [f"{uuid.uuid4()}-1" for _ in range(COUNT)]
    names = "".join(f"hpcb-{key}\n" for key in keys)
    deadline = Deadline.after(600)
    with pool.open(target(slurm), credentials(slurm), deadline=deadline) as conn:
        submitted = conn.run(
            ["sh", "-c", 'cd /tmp && while read -r n; do sbatch --parsable --hold '
             '--output=/dev/null "--job-name=$n" --wrap=true </dev/null || exit; done'],
            stdin=names.encode(), deadline=deadline)
        assert submitted.exit_status == 0, submitted.err
        job_ids = submitted.out.split()
        try:
            refs = [JobRef(key, job, (job,)) for key, job in zip(keys, job_ids, strict=True)]
            for ref in refs:
                cache.track(conn.credential_key, scheduler, ref)

            def round_of_lookups() -> tuple[dict[str, float], list[Sequence[TaskState]]]:
                """Every BatchJob's sync in one round: the snapshot has aged past the TTL."""
                now[0] += 60
                before = commands(metrics)
                answers = [cache.lookup(conn.credential_key, scheduler, lambda _: opened(conn),
                                        ref, deadline=deadline) for ref in refs]
                after = commands(metrics)
                return {v: after[v] - before.get(v, 0) for v in after
                        if after[v] != before.get(v, 0)}, answers

            waiting, answers = round_of_lookups()
            assert waiting == {"squeue": 1}
            assert all(task.reason is Reason.HELD and task.scheduler_reason == "JobHeldUser"
                       for answer in answers for task in answer)
            conn.run(["scancel", *job_ids], deadline=deadline)
            wait_for(lambda: all(
                t.outcome is Outcome.CANCELLED
                for answer in scheduler.query(conn, refs, deadline=deadline,
                                              whole_queue=False).values()
                for t in answer), timeout=120)
            ending, answers = round_of_lookups()
            assert ending == {"squeue": 1, "sacct": -(-COUNT // SACCT_CHUNK)}
            assert all(task.outcome is Outcome.CANCELLED and task.usage is not None
                       for answer in answers for task in answer)
            print(f"remote commands per round, {COUNT} BatchJobs: waiting {waiting}, "
                  f"ending {ending}")
        finally:
            conn.run(["scancel", *job_ids], deadline=Deadline.after(60))
    pool.close()
