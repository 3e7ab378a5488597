"""The SSH layer (``hooks.ssh``) against the real services: login nodes reached through the SSH
bastion by a name only the bastion resolves, pooled (one bastion connection for every login node
behind it) and alone (the log Pod's way), with plain and hashed known_hosts; a bastion with
another host key, one that is down and one that cannot reach the login node, each an error that
names the jump host; and logins with SSH user certificates, whose validity the Secret's parsing
checks before any login.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hooks.core.sites.openssh import SecretError
from hooks.core.sites.secret import Credentials, parse_secret
from hooks.deadline import Deadline
from hooks.metrics import Metrics
from hooks.ssh import errors
from hooks.ssh.client import Jump, Target
from hooks.ssh.login import connect
from hooks.ssh.pool import Pool
from tests.integration.conftest import Bastion, Cluster, read_from


@pytest.fixture
def pool() -> Iterator[Pool]:
    shared = Pool(Metrics())
    yield shared
    shared.close()


def within(seconds: float = 20) -> Deadline:
    return Deadline.after(seconds)


def jump(bastion: Bastion, *, port: int | None = None, known_hosts: str | None = None) -> Jump:
    credentials = Credentials(bastion.user, private_key=bastion.key,
                              known_hosts=known_hosts or bastion.known_hosts)
    return Jump(bastion.host, port or bastion.port, False, credentials)


def behind(bastion: Bastion, cluster: Cluster, via: Jump | None = None) -> Target:
    """The cluster's login node by the name only the bastion resolves, through the bastion."""
    route = bastion.route(cluster.backend)
    return Target(route.name, route.port, jump=(via or jump(bastion),))


def login(cluster: Cluster, known_hosts: str, **keys: str) -> Credentials:
    """The cluster's Secret (``keys`` replace its own), as the hooks parse it now."""
    secret = cluster.secret("login", **{"known_hosts": known_hosts, **keys})
    return parse_secret(secret, insecure_host_keys=False, now=now())


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def user_of(pool: Pool, target: Target, credentials: Credentials) -> str:
    with pool.open(target, credentials, deadline=within()) as conn:
        return conn.run(["id", "-un"], deadline=within()).out.strip()


@pytest.fixture
def bastion_ports(bastion: Bastion, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The local ports of the connections this test opens to the bastion: the bastion is
    everybody's, and other tests log in to it at the same time."""
    ports: list[int] = []
    opened = socket.create_connection

    def recorded(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        sock = opened(address, *args, **kwargs)
        if address[1] == bastion.port:
            ports.append(sock.getsockname()[1])
        return sock

    monkeypatch.setattr(socket, "create_connection", recorded)
    return ports


def accepted(bastion: Bastion, since: int, ports: list[int]) -> int:
    """How many logins of the jump user over this test's connections (``ports``) the bastion
    accepted since that point of its log."""
    text = read_from(bastion.log, since)
    return sum(text.count(f"Accepted publickey for {bastion.user} from {bastion.host} port {port} ")
               for port in ports)


@pytest.mark.parametrize("hashed", [pytest.param(False, id="plain-known-hosts"),
                                    pytest.param(True, id="hashed-known-hosts")])
def test_commands_run_on_the_login_node_through_the_bastion(
    bastion: Bastion, cluster: Cluster, pool: Pool, hashed: bool
) -> None:
    route = bastion.route(cluster.backend)
    known_hosts = route.known_hosts_hashed if hashed else route.known_hosts
    assert route.name not in known_hosts or not hashed
    since = bastion.log_size()
    assert user_of(pool, behind(bastion, cluster), login(cluster, known_hosts)) == cluster.user
    assert (route.name, route.port) in bastion.forwarded(since)


def test_the_login_nodes_name_resolves_only_on_the_bastion(
    bastion: Bastion, cluster: Cluster
) -> None:
    route = bastion.route(cluster.backend)
    with pytest.raises(errors.ClusterUnreachable) as caught:
        connect(Target(route.name, route.port), login(cluster, route.known_hosts),
                deadline=within())
    assert caught.value.message.startswith(f"cannot reach {route.name} port {route.port}: ")


@pytest.mark.slurm
@pytest.mark.htcondor
def test_one_bastion_connection_serves_every_login_node_behind_it(
    bastion: Bastion, slurm: Cluster, htcondor: Cluster, pool: Pool, bastion_ports: list[int]
) -> None:
    since = bastion.log_size()
    for _ in range(3):
        for cluster in (slurm, htcondor):
            credentials = login(cluster, bastion.route(cluster.backend).known_hosts)
            assert user_of(pool, behind(bastion, cluster), credentials) == cluster.user
    assert (len(pool), pool.jump_hosts) == (2, 1)
    assert len(bastion_ports) == 1
    assert accepted(bastion, since, bastion_ports) == 1
    # Both login nodes were reached through the bastion (other tests' connections are in its
    # log too: the one connection above is this test's).
    forwarded = set(bastion.forwarded(since))
    assert {(bastion.route(c.backend).name, bastion.route(c.backend).port)
            for c in (slurm, htcondor)} <= forwarded


def test_the_log_pods_connection_takes_the_same_route_and_closes_it(
    bastion: Bastion, cluster: Cluster
) -> None:
    route = bastion.route(cluster.backend)
    since = bastion.log_size()
    conn = connect(behind(bastion, cluster), login(cluster, route.known_hosts_hashed),
                   deadline=within())
    try:
        assert conn.run(["id", "-un"], deadline=within()).out.strip() == cluster.user
        assert conn.via is not None and conn.via.alive
    finally:
        conn.close()
    assert not conn.via.alive
    assert (route.name, route.port) in bastion.forwarded(since)


def test_a_bastion_with_another_host_key_is_a_host_key_mismatch(
    bastion: Bastion, cluster: Cluster, pool: Pool, bastion_ports: list[int]
) -> None:
    route = bastion.route(cluster.backend)
    # The login node's key, listed under the bastion's name.
    other = f"[{bastion.host}]:{bastion.port} {route.known_hosts.split(maxsplit=1)[1]}"
    target = behind(bastion, cluster, jump(bastion, known_hosts=other))
    since = bastion.log_size()
    with pytest.raises(errors.HostKeyMismatch) as caught:
        user_of(pool, target, login(cluster, route.known_hosts))
    assert caught.value.host == route.name
    assert caught.value.message.startswith(
        f"the host key of jump host [{bastion.host}]:{bastion.port} (")
    assert caught.value.message.endswith(
        f"is not in the known_hosts of the Secret of jump host {bastion.host}")
    assert bastion_ports
    assert accepted(bastion, since, bastion_ports) == 0


def test_a_bastion_that_is_down_is_unreachable_and_named(
    bastion: Bastion, cluster: Cluster, pool: Pool
) -> None:
    """The bastion is everybody's: "down" is a port where nothing listens."""
    with socket.socket() as probe:
        probe.bind((bastion.host, 0))
        closed = probe.getsockname()[1]
    route = bastion.route(cluster.backend)
    target = behind(bastion, cluster, jump(bastion, port=closed))
    expected = f"cannot reach jump host {bastion.host} port {closed}: Connection refused"
    for _ in range(2):  # the second answer comes from the failed-connect memory
        with pytest.raises(errors.ClusterUnreachable) as caught:
            user_of(pool, target, login(cluster, route.known_hosts))
        assert (caught.value.host, caught.value.message) == (route.name, expected)
    with pytest.raises(errors.ClusterUnreachable) as alone:
        connect(target, login(cluster, route.known_hosts), deadline=within())
    assert alone.value.message == expected


def test_a_login_node_the_bastion_cannot_reach(
    bastion: Bastion, cluster: Cluster, pool: Pool
) -> None:
    route = bastion.route(cluster.backend)
    target = Target("nowhere.hpcbridge.test", 22, jump=(jump(bastion),))
    with pytest.raises(errors.ClusterUnreachable) as caught:
        user_of(pool, target, login(cluster, route.known_hosts))
    assert caught.value.message.startswith(
        f"jump host {bastion.host} could not open a tunnel to nowhere.hpcbridge.test port 22: "
        "connect failed")


# --- SSH user certificates ---------------------------------------------------------------------

def certified(cluster: Cluster) -> tuple[str, str]:
    """The cluster's certificate-only key and its valid certificate."""
    return cluster.cert_key.read_text(), cluster.cert.read_text()


def test_a_certificate_logs_in_with_a_key_no_authorized_keys_lists(
    cluster: Cluster, pool: Pool
) -> None:
    key, cert = certified(cluster)
    direct = Target(cluster.host, cluster.port)
    since = cluster.ssh_log.stat().st_size
    credentials = login(cluster, cluster.known_hosts, **{"ssh-privatekey": key,
                                                         "ssh-certificate": cert})
    assert credentials.certificate == cert
    assert user_of(pool, direct, credentials) == cluster.user
    assert f'Accepted certificate ID "{cluster.cert_id}"' in read_from(cluster.ssh_log, since)
    # The key alone is refused: the certificate is what logged in.
    with pytest.raises(errors.AuthenticationFailed) as caught:
        user_of(pool, direct, login(cluster, cluster.known_hosts, **{"ssh-privatekey": key}))
    assert caught.value.message == f"{cluster.host} refused the login of {cluster.user!r}"


def test_a_certificate_through_the_bastion(bastion: Bastion, cluster: Cluster) -> None:
    key, cert = certified(cluster)
    route = bastion.route(cluster.backend)
    credentials = login(cluster, route.known_hosts, **{"ssh-privatekey": key,
                                                       "ssh-certificate": cert})
    conn = connect(behind(bastion, cluster), credentials, deadline=within())
    try:
        assert conn.run(["id", "-un"], deadline=within()).out.strip() == cluster.user
    finally:
        conn.close()


@pytest.mark.parametrize(("which", "ending"), [
    pytest.param("cert_expired", "and has expired.", id="expired"),
    pytest.param("cert_future", "and is not valid yet.", id="not-yet-valid"),
])
def test_a_certificate_outside_its_window_is_refused_before_any_login(
    cluster: Cluster, which: str, ending: str
) -> None:
    key, _ = certified(cluster)
    path: Path = getattr(cluster, which)
    with pytest.raises(SecretError) as caught:
        login(cluster, cluster.known_hosts, **{"ssh-privatekey": key,
                                               "ssh-certificate": path.read_text()})
    message = str(caught.value)
    assert message.startswith("the Secret's ssh-certificate is valid from ")
    assert message.endswith(ending)
    if which == "cert_expired":
        assert " 2020-" in message
