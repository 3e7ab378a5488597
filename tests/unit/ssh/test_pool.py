"""The SSH pool without SSH: one connection per credential set and route, dropped when broken,
closed when idle; commands wait for a channel only as long as their deadline leaves time; a
jump host's connection is shared by the targets behind it and outlives none of them."""

from __future__ import annotations

import time
from typing import cast

import paramiko
import pytest

from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh import errors
from hooks.ssh.client import Connection, Jump, Target
from hooks.ssh.pool import Pool
from hooks.ssh.pool_keys import pool_key

TARGET = Target("login.hpc.example.org", 22)


class FakeTransport:
    """The part of a ``paramiko.Transport`` that a connection's liveness and closing use."""

    def __init__(self) -> None:
        self.closed = False

    def is_active(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


class Connector:
    """Makes connections on fake transports, noting each leg it was asked for."""

    def __init__(self) -> None:
        self.made: list[FakeTransport] = []
        self.legs: list[tuple[str, Connection | None, str | None]] = []
        """(host, via, toward) of each leg, in order."""
        self.connections: dict[str, list[Connection]] = {}

    def __call__(self, target: Target, credentials: Credentials, deadline: Deadline,
                 via: Connection | None, toward: str | None) -> Connection:
        self.legs.append((target.host, via, toward))
        self.made.append(FakeTransport())
        conn = Connection(cast(paramiko.Transport, self.made[-1]), target, via=via)
        self.connections.setdefault(target.host, []).append(conn)
        return conn


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
    # The wait for a channel leaves the command its time: 5.2 s leave 0.2 s to wait.
    with (shared.open(TARGET, creds, deadline=Deadline.after(5)) as conn,
          conn._channel(["squeue"], Deadline.after(10)),
          pytest.raises(errors.CommandTimeout, match="no free SSH channel"),
          conn._channel(["squeue"], Deadline.after(5.2))):
        pass


class Refusing(Connector):
    """A connector whose every leg fails the way ``error`` does."""

    def __init__(self, error: type[errors.SSHError]) -> None:
        super().__init__()
        self.error = error

    def __call__(self, target: Target, credentials: Credentials, deadline: Deadline,
                 via: Connection | None, toward: str | None) -> Connection:
        self.made.append(FakeTransport())
        raise self.error(target.host, f"{target.host} failed")


def test_a_failed_connect_answers_for_a_while_without_another_attempt(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = Refusing(errors.ClusterUnreachable)
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


def test_a_host_that_never_answered_answers_every_credential_set_at_once() -> None:
    """A blackholed login node costs one connect timeout, not one per BatchJob's Secret."""
    connector = Refusing(errors.HostUnreachable)
    shared = Pool(Metrics(), connector=connector)
    for user in ("alice", "bob", "carol"):
        with pytest.raises(errors.HostUnreachable), \
                shared.open(TARGET, Credentials(user, password=user), deadline=Deadline.after(5)):
            pass
    assert len(connector.made) == 1
    bastion = (Jump("bastion.example.org", 22, False, Credentials("jump", password="j")),)
    with pytest.raises(errors.HostUnreachable), shared.open(
            Target(TARGET.host, TARGET.port, jump=bastion), Credentials("alice", password="a"),
            deadline=Deadline.after(5)):
        pass
    assert len(connector.made) == 2  # another route tries for itself (its jump host fails)


def test_a_jump_host_that_never_answered_answers_every_login_to_it_at_once() -> None:
    """A blackholed bastion costs one connect timeout, whoever logs in to it and whatever
    login node lies behind it."""
    connector = Refusing(errors.HostUnreachable)
    shared = Pool(Metrics(), connector=connector)
    for user, host in (("alice", "login-a"), ("bob", "login-b")):
        bastion = (Jump("bastion.example.org", 22, False, Credentials(user, password=user)),)
        with pytest.raises(errors.HostUnreachable), shared.open(
                Target(host, 22, jump=bastion), Credentials(user, password=user),
                deadline=Deadline.after(5)):
            pass
    assert len(connector.made) == 1


@pytest.mark.parametrize("error", [errors.AuthenticationFailed, errors.HostKeyMismatch,
                                   errors.ClusterUnreachable])
def test_a_failure_after_the_handshake_stays_with_its_credentials(
    error: type[errors.SSHError]
) -> None:
    """A refused login, a host key the Secret does not list, a tunnel one jump login may not
    open: the next credential set tries for itself."""
    connector = Refusing(error)
    shared = Pool(Metrics(), connector=connector)
    for user in ("alice", "bob"):
        with pytest.raises(error), \
                shared.open(TARGET, Credentials(user, password=user), deadline=Deadline.after(5)):
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


BASTION = Credentials("jumper", private_key="jump-key", known_hosts="bastion keys")


def behind(host: str, *jumps: Jump) -> Target:
    return Target(host, 22, jump=jumps or (Jump("bastion.example.org", 22, False, BASTION),))


def use(shared: Pool, target: Target, creds: Credentials | None = None) -> Connection:
    with shared.open(target, creds or Credentials("alice", password="a"),
                     deadline=Deadline.after(5)) as pooled:
        return pooled.connection


def test_a_jump_host_connection_is_shared_by_every_target_behind_it() -> None:
    shared, connector = pool()
    first, second = use(shared, behind("login1.hpc")), use(shared, behind("login2.hpc"))
    use(shared, behind("login1.hpc"))
    assert [(host, toward) for host, _, toward in connector.legs] == [
        ("bastion.example.org", "login1.hpc"), ("login1.hpc", None), ("login2.hpc", None)]
    bastion = connector.connections["bastion.example.org"][0]
    assert first.via is bastion and second.via is bastion
    assert (len(shared), shared.jump_hosts) == (2, 1)


@pytest.mark.parametrize("other", [
    pytest.param(behind("login.hpc", Jump("bastion2.example.org", 22, False, BASTION)),
                 id="jump-host"),
    pytest.param(behind("login.hpc", Jump("bastion.example.org", 2222, False, BASTION)),
                 id="jump-port"),
    pytest.param(behind("login.hpc", Jump("bastion.example.org", 22, True, BASTION)),
                 id="jump-insecure"),
    pytest.param(behind("login.hpc", Jump("bastion.example.org", 22, False,
                                          Credentials("jumper", password="p"))),
                 id="jump-credentials"),
    pytest.param(behind("login.hpc", Jump("gate.example.org", 22, False, BASTION),
                        Jump("bastion.example.org", 22, False, BASTION)), id="more-jumps"),
    pytest.param(Target("login.hpc", 22), id="direct"),
])
def test_the_route_is_part_of_the_key_and_routes_share_nothing(other: Target) -> None:
    creds = Credentials("alice", password="a")
    route = behind("login.hpc")
    assert pool_key(route, creds) == pool_key(behind("login.hpc"), creds)
    assert pool_key(other, creds) != pool_key(route, creds)
    shared, _ = pool()
    assert use(shared, route, creds) is not use(shared, other, creds)
    assert len(shared) == 2


def test_without_jump_hosts_the_key_is_the_credential_fingerprint() -> None:
    creds = Credentials("alice", password="a")
    assert pool_key(TARGET, creds) == creds.fingerprint(TARGET.host, 22, False)


def test_jump_hosts_in_a_row_tunnel_through_each_other() -> None:
    shared, connector = pool()
    gate = Jump("gate.example.org", 22, False, BASTION)
    inner = Jump("inner.example.org", 22, False, BASTION)
    conn = use(shared, behind("login.hpc", gate, inner))
    gate_conn = connector.connections["gate.example.org"][0]
    inner_conn = connector.connections["inner.example.org"][0]
    assert (conn.via, inner_conn.via, gate_conn.via) == (inner_conn, gate_conn, None)
    assert [toward for _, _, toward in connector.legs] == ["login.hpc", "login.hpc", None]
    # The inner host reached directly is another connection (its route differs).
    use(shared, behind("other.hpc", inner))
    assert len(connector.connections["inner.example.org"]) == 2


def test_a_target_whose_jump_host_died_is_reconnected_through_a_new_one() -> None:
    shared, connector = pool()
    conn = use(shared, behind("login.hpc"))
    connector.connections["bastion.example.org"][0].close()
    assert not conn.alive
    again = use(shared, behind("login.hpc"))
    assert again is not conn and again.alive
    assert len(connector.connections["bastion.example.org"]) == 2
    assert not conn.transport.is_active()


def test_a_failed_jump_host_answers_every_target_behind_it_for_a_while() -> None:
    attempts: list[str] = []

    class JumpFails(Connector):
        def __call__(self, target: Target, credentials: Credentials, deadline: Deadline,
                     via: Connection | None, toward: str | None) -> Connection:
            if toward is None:
                return super().__call__(target, credentials, deadline, via, toward)
            attempts.append(target.host)
            raise errors.HostKeyMismatch(toward, f"the host key of jump host {target.host} "
                                         "is not in its Secret's known_hosts")

    shared = Pool(Metrics(), connector=JumpFails())
    for login in ("login1.hpc", "login2.hpc", "login1.hpc"):
        with pytest.raises(errors.HostKeyMismatch) as caught:
            use(shared, behind(login))
        assert caught.value.host == login
        assert "jump host bastion.example.org" in caught.value.message
    assert attempts == ["bastion.example.org"]


def test_a_jump_host_stays_open_while_a_target_routes_through_it(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [time.monotonic()]
    monkeypatch.setattr("hooks.ssh.pool.time.monotonic", lambda: now[0])
    shared, connector = pool()
    use(shared, behind("login1.hpc"))
    now[0] += 60
    use(shared, behind("login2.hpc"))
    bastion = connector.connections["bastion.example.org"][0]
    login1, login2 = connector.connections["login1.hpc"][0], connector.connections["login2.hpc"][0]
    assert shared.evict_idle(30) == 1
    assert (login1.alive, bastion.alive, login2.alive) == (False, True, True)
    now[0] += 60
    assert shared.evict_idle(30) == 2
    assert (bastion.alive, login2.alive) == (False, False)
    assert (len(shared), shared.jump_hosts) == (0, 0)


def test_closing_the_pool_closes_the_jump_hosts_too() -> None:
    shared, connector = pool()
    use(shared, behind("login1.hpc"))
    shared.close()
    assert all(transport.closed for transport in connector.made)


def test_a_full_pool_closes_the_least_recently_used_connection_no_call_holds() -> None:
    connector = Connector()
    shared = Pool(Metrics(), max_connections=3, connector=connector)
    logins = [Credentials(f"user{n}", password="p") for n in range(5)]
    for creds in logins[:3]:
        with shared.open(TARGET, creds, deadline=Deadline.after(5)):
            pass
    with shared.open(TARGET, logins[0], deadline=Deadline.after(5)):  # used again: not the LRU
        pass
    with shared.open(TARGET, logins[3], deadline=Deadline.after(5)):
        pass
    assert len(shared) == 3
    assert [t.closed for t in connector.made] == [False, True, False, False]
    with shared.open(TARGET, logins[2], deadline=Deadline.after(5)), \
            shared.open(TARGET, logins[4], deadline=Deadline.after(5)):
        pass  # logins[2], held meanwhile, is not the one closed: logins[0] is
    assert [t.closed for t in connector.made] == [True, True, False, False, False]
    assert len(shared) == 3


def test_a_full_pool_whose_connections_are_all_held_grows_until_they_are_given_back() -> None:
    connector = Connector()
    shared = Pool(Metrics(), max_connections=1, connector=connector)
    alice, bob = Credentials("alice", password="a"), Credentials("bob", password="b")
    with shared.open(TARGET, alice, deadline=Deadline.after(5)), \
            shared.open(TARGET, bob, deadline=Deadline.after(5)):
        assert len(shared) == 2
    with shared.open(TARGET, Credentials("carol", password="c"), deadline=Deadline.after(5)):
        pass
    assert len(shared) == 2  # one of the two given back was closed
    assert sum(t.closed for t in connector.made) == 1


def test_evicting_the_last_target_behind_a_jump_host_closes_its_connection() -> None:
    connector = Connector()
    shared = Pool(Metrics(), max_connections=1, connector=connector)
    creds = Credentials("alice", password="a")
    behind = Target("inner", 22, jump=(Jump("bastion", 22, False, creds),))
    with shared.open(behind, creds, deadline=Deadline.after(5)):
        pass
    assert shared.jump_hosts == 1
    with shared.open(TARGET, creds, deadline=Deadline.after(5)):
        pass
    assert (shared.jump_hosts, len(shared)) == (0, 1)
    assert [conn.transport.is_active() for conn in connector.connections["bastion"]] == [False]
