"""Two BatchClusters with the same host and logins: each has a connection of its own, so the
metrics' ``cluster`` label of each names its own BatchCluster, not the first one used."""

from __future__ import annotations

from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh.client import Jump, Target
from hooks.ssh.pool import Pool
from hooks.ssh.pool_keys import pool_key
from tests.unit.ssh.test_pool import BASTION, Connector

LOGIN = Credentials("alice", private_key="key", known_hosts="the sites' keys")


def test_the_batchcluster_is_part_of_the_key() -> None:
    a, b = Target("login.hpc", 22, site="hpc-a"), Target("login.hpc", 22, site="hpc-b")
    assert pool_key(a, LOGIN) == pool_key(Target("login.hpc", 22, site="hpc-a"), LOGIN)
    assert len({pool_key(a, LOGIN), pool_key(b, LOGIN), pool_key(Target("login.hpc", 22),
                                                                    LOGIN)}) == 3


def test_each_batchcluster_labels_its_own_commands_and_connects() -> None:
    metrics = Metrics()
    shared = Pool(metrics, connector=Connector())
    jump = (Jump("bastion.example.org", 22, False, BASTION),)
    for site in ("hpc-a", "hpc-b", "hpc-a"):
        target = Target("login.hpc", 22, jump=jump, site=site)
        with (shared.open(target, LOGIN, deadline=Deadline.after(5)) as conn,
              conn._channel(["squeue"], Deadline.after(10))):
            pass
    sample = metrics.registry.get_sample_value
    for site, runs in (("hpc-a", 2), ("hpc-b", 1)):
        assert sample("hpcbridge_remote_commands_total",
                      {"cluster": site, "verb": "squeue", "outcome": "ok"}) == runs
        assert sample("hpcbridge_ssh_connects_total",
                      {"cluster": site, "outcome": "ok"}) == 1
    assert len(shared) == 2
