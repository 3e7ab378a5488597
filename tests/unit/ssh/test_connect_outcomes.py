"""SSH connects are counted as ok, refused (the host would not take this login) or failed (the
host could not be reached): the alert HpcbridgeClusterUnreachable fires on failed alone."""

from __future__ import annotations

import pytest

from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh import errors
from hooks.ssh.client import Connection, Target
from hooks.ssh.pool import Connector, Pool

TARGET = Target("login.hpc.example.org", 22)


def failing(error: type[errors.SSHError]) -> Connector:
    def connect(target: Target, credentials: Credentials, deadline: Deadline,
                via: Connection | None, toward: str | None) -> Connection:
        raise error(target.host, f"{target.host} failed")
    return connect


def connects(metrics: Metrics, cluster: str, outcome: str) -> float | None:
    return metrics.registry.get_sample_value(
        "hpcbridge_ssh_connects_total", {"cluster": cluster, "outcome": outcome})


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (errors.AuthenticationFailed, "refused"),
        (errors.HostKeyMismatch, "refused"),
        (errors.BadCredentials, "invalid_secret"),
        (errors.HostUnreachable, "failed"),
        (errors.ClusterUnreachable, "failed"),
        (errors.CommandTimeout, "failed"),
    ],
)
def test_a_failed_connect_says_whether_the_host_answered(
    error: type[errors.SSHError], outcome: str
) -> None:
    metrics = Metrics()
    pool = Pool(metrics, connector=failing(error))
    with pytest.raises(error), pool.open(TARGET, Credentials("alice", password="a"),
                                         deadline=Deadline.after(5)):
        pass
    assert connects(metrics, "unverified", outcome) == 1


def test_a_refused_login_never_admits_a_cluster_label() -> None:
    metrics = Metrics()
    for i in range(5):
        metrics.ssh_connect(f"host-{i}.example.org:22", ok=False, refused=True)
    assert connects(metrics, "unverified", "refused") == 5
    metrics.ssh_connect("host-0.example.org:22", ok=True)
    metrics.ssh_connect("host-0.example.org:22", ok=False, refused=True)
    assert connects(metrics, "host-0.example.org:22", "refused") == 1
