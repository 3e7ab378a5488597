"""The SSH pool without SSH: one connection per credential set, dropped when broken, closed
when idle; commands wait for a channel only as long as their deadline leaves time."""

from __future__ import annotations

import time

import pytest

from hooks.core.secret import Credentials
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh import errors
from hooks.ssh.client import Connection, Target
from hooks.ssh.pool import Pool

TARGET = Target("login.hpc.example.org", 22)


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def is_active(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


class Connector:
    def __init__(self) -> None:
        self.made: list[FakeTransport] = []

    def __call__(self, target: Target, credentials: Credentials,
                 deadline: Deadline) -> Connection:
        self.made.append(FakeTransport())
        return Connection(self.made[-1], target)  # type: ignore[arg-type]


def pool(max_channels: int = 8) -> tuple[Pool, Connector]:
    connector = Connector()
    return Pool(Metrics(), max_channels=max_channels, connector=connector), connector


def test_one_connection_per_credential_set() -> None:
    shared, connector = pool()
    alice, bob = Credentials("alice", password="a"), Credentials("bob", password="b")
    for creds in (alice, alice, bob):
        with shared.open(TARGET, creds, deadline=Deadline.after(5)):
            pass
    assert (len(connector.made), len(shared)) == (2, 2)


def test_a_broken_connection_is_dropped_and_reopened() -> None:
    shared, connector = pool()
    creds = Credentials("alice", password="a")
    with pytest.raises(errors.ClusterUnreachable), \
            shared.open(TARGET, creds, deadline=Deadline.after(5)):
        raise errors.ClusterUnreachable(TARGET.host, "the connection broke")
    assert connector.made[0].closed
    with shared.open(TARGET, creds, deadline=Deadline.after(5)):
        pass
    assert len(connector.made) == 2


def test_idle_connections_are_closed() -> None:
    shared, connector = pool()
    with shared.open(TARGET, Credentials("old", password="a"), deadline=Deadline.after(5)):
        pass
    time.sleep(0.05)
    with shared.open(TARGET, Credentials("new", password="b"), deadline=Deadline.after(5)):
        pass
    assert shared.evict_idle(0.04) == 1
    assert [t.closed for t in connector.made] == [True, False]
    assert len(shared) == 1


def test_no_free_channel_within_the_deadline_is_a_command_timeout() -> None:
    shared, _ = pool(max_channels=1)
    creds = Credentials("alice", password="a")
    with (shared.open(TARGET, creds, deadline=Deadline.after(5)) as conn,
          conn._channel(["squeue"], Deadline.after(10))):
        started = time.monotonic()
        with pytest.raises(errors.CommandTimeout), \
                conn._channel(["squeue"], Deadline.after(5.2)):
            pass
    assert time.monotonic() - started < 1


class Failing(Connector):
    def __call__(self, target: Target, credentials: Credentials,
                 deadline: Deadline) -> Connection:
        self.made.append(FakeTransport())
        raise errors.ClusterUnreachable(target.host, f"cannot reach {target.host}")


def test_a_failed_connect_answers_for_a_while_without_another_attempt(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = Failing()
    shared = Pool(Metrics(), connector=connector)
    creds = Credentials("alice", password="a")
    for _ in range(5):
        with pytest.raises(errors.ClusterUnreachable), \
                shared.open(TARGET, creds, deadline=Deadline.after(5)):
            pass
    assert len(connector.made) == 1
    later = time.monotonic() + 11
    monkeypatch.setattr("hooks.ssh.pool.time.monotonic", lambda: later)
    with pytest.raises(errors.ClusterUnreachable), \
            shared.open(TARGET, creds, deadline=Deadline.after(5)):
        pass
    assert len(connector.made) == 2


def test_an_idle_cluster_leaves_the_metrics() -> None:
    metrics = Metrics()
    shared = Pool(metrics, connector=Connector())
    with (shared.open(TARGET, Credentials("alice", password="a"), deadline=Deadline.after(5))
          as conn, conn._channel(["squeue"], Deadline.after(10))):
        pass
    series = {"cluster": "login.hpc.example.org:22", "verb": "squeue", "outcome": "ok"}
    assert metrics.registry.get_sample_value("hpcbridge_remote_commands_total", series) == 1
    time.sleep(0.02)
    shared.evict_idle(0.01)
    assert metrics.registry.get_sample_value("hpcbridge_remote_commands_total", series) is None
