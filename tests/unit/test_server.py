"""hooks.server's parts that need no socket: the lane of a call, the admission to the hook
threads, request targets, the probes' port setting, the TLS files' reload, and a connection over
a transport of the test's (turns, answers to HEAD, the access log). The server itself is tested
end to end in tests/integration/test_slow_clients.py and test_tls.py."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import logging
import os
import ssl
from pathlib import Path
from typing import Any

import pytest
from gunicorn import glogging
from gunicorn.config import Config

from hooks import server
from hooks.app import create_app

REPO = Path(__file__).resolve().parents[2]
SYNC = json.loads((REPO / "examples/requests/sync-running.json").read_text())


def body(cluster: object, key: str = "parent", **parent: object) -> bytes:
    return json.dumps({key: {"spec": {"cluster": cluster}, **parent}}).encode()


@pytest.mark.parametrize(("path", "request_body", "lane"), [
    pytest.param("/sync", json.dumps(SYNC).encode(), "login.hpc.example.org:22", id="sync"),
    pytest.param("/finalize", body({"host": "Login.Example.org", "port": 2222}),
                 "login.example.org:2222", id="finalize-host-case-folded"),
    pytest.param("/sync", body({"host": "h"}, key="object"), "h:22", id="decorator-default-port"),
    pytest.param("/sync", body({"host": "new"}, status={"cluster": {"host": "old", "port": 2}}),
                 "old:2", id="the-attempt-under-way-stays-on-its-cluster"),
    pytest.param("/sync", body({"host": "new"}, status={"phase": "Pending"}), "new:22",
                 id="no-attempt-yet"),
    pytest.param("/customize", json.dumps(SYNC).encode(), "", id="customize-contacts-nobody"),
    pytest.param("/sync", b"not json", "", id="not-json"),
    pytest.param("/sync", b"[1]", "", id="not-an-object"),
    pytest.param("/sync", body({"host": 7}), "", id="host-not-text"),
    pytest.param("/sync", body("login"), "", id="cluster-not-an-object"),
    pytest.param("/sync", body({"host": "h", "port": [[[]]]}), "h:22", id="port-not-a-number"),
    pytest.param("/sync", body({"host": "h", "port": True}), "h:22", id="port-a-boolean"),
    pytest.param("/sync", body({"host": "h", "pad": "x" * server.LANE_PARSE_LIMIT}), "",
                 id="too-large-to-parse-on-the-loop"),
])
def test_cluster_of(path: str, request_body: bytes, lane: str) -> None:
    assert server.cluster_of(path, request_body) == lane


@pytest.mark.parametrize(("target", "path", "query"), [
    pytest.param(b"/sync", "/sync", "", id="plain"),
    pytest.param(b"/metrics?name=x&y", "/metrics", "name=x&y", id="query"),
    pytest.param(b"/a%20b%2Fc", "/a b/c", "", id="percent-decoded"),
    pytest.param(b"/%C3%A9", "/\xc3\xa9", "", id="bytes-as-latin-1"),
    pytest.param(b"http://hooks:8080/healthz?x", "/healthz", "x", id="absolute-form"),
])
def test_split_target(target: bytes, path: str, query: str) -> None:
    assert server.split_target(target) == (path, query)


@pytest.mark.parametrize(("env", "port"), [
    pytest.param({}, None, id="unset"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": ""}, None, id="empty"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": "9090"}, 9090, id="set"),
])
def test_probe_port(env: dict[str, str], port: int | None) -> None:
    assert server.probe_port(env) == port


@pytest.mark.parametrize("value", ["0", "65536", "90x", "8080"])
def test_a_probe_port_that_cannot_be_refuses_to_start(value: str) -> None:
    with pytest.raises(ValueError, match="is not a free port number beside PORT"):
        server.probe_port({"HPCBRIDGE_METRICS_PORT": value, "PORT": "8080"})


# --- the gate ------------------------------------------------------------------------------


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_the_gate_keeps_each_lane_to_its_share_and_the_rest_to_the_others() -> None:
    async def scenario() -> list[str]:
        gate = server.Gate(total=3, per_lane=2)
        order: list[str] = []

        async def call(name: str, lane: str, hold: asyncio.Event) -> None:
            await gate.enter(lane)
            order.append(name)
            await hold.wait()
            gate.leave(lane)

        stuck, quick = asyncio.Event(), asyncio.Event()
        quick.set()
        tasks = [asyncio.create_task(call(f"stuck-{i}", "dead:22", stuck)) for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(call("other", "alive:22", quick)))
        await asyncio.sleep(0.01)
        assert (gate.running, len(gate.waiting)) == (2, 2)  # the third thread stayed free
        stuck.set()
        await asyncio.gather(*tasks)
        assert (gate.running, gate.lanes, gate.waiting) == (0, {}, type(gate.waiting)())
        return order

    assert run(scenario()) == ["stuck-0", "stuck-1", "other", "stuck-2", "stuck-3"]


def test_the_gate_admits_in_order_of_arrival_within_the_total() -> None:
    async def scenario() -> list[str]:
        gate = server.Gate(total=1, per_lane=1)
        order: list[str] = []
        release = asyncio.Event()

        async def call(name: str, lane: str) -> None:
            await gate.enter(lane)
            order.append(name)
            await release.wait()
            gate.leave(lane)

        tasks = []
        for name, lane in (("a", "x"), ("b", "y"), ("c", "x"), ("d", "z")):
            tasks.append(asyncio.create_task(call(name, lane)))
            await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return order

    assert run(scenario()) == ["a", "b", "c", "d"]


def test_a_call_whose_client_left_while_it_waited_takes_no_thread() -> None:
    async def scenario() -> None:
        gate = server.Gate(total=1, per_lane=1)
        await gate.enter("x")
        waiting = asyncio.create_task(gate.enter("y"))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not gate.waiting
        gate.leave("x")
        assert (gate.running, gate.lanes) == (0, {})

    run(scenario())


def test_a_call_admitted_as_its_client_left_gives_its_thread_back() -> None:
    async def scenario() -> None:
        gate = server.Gate(total=1, per_lane=1)
        await gate.enter("x")
        waiting = asyncio.create_task(gate.enter("y"))
        await asyncio.sleep(0)
        gate.leave("x")  # admits the waiting call...
        waiting.cancel()  # ...whose client leaves before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert (gate.running, gate.lanes, len(gate.waiting)) == (0, {}, 0)

    run(scenario())


# --- the TLS files -------------------------------------------------------------------------


def make_pair(directory: Path, name: str) -> tuple[Path, Path]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def test_the_tls_context_is_built_again_when_a_file_changes(tmp_path: Path) -> None:
    cert, key = make_pair(tmp_path, "first")
    tls = server.ServerTLS(str(cert), str(key), None, ssl.CERT_NONE, None,
                           logging.getLogger("test"))
    first = tls.context()
    assert tls.context() is first  # unchanged files: the same context
    new_cert, new_key = make_pair(tmp_path, "second")
    os.replace(new_key, key)
    os.replace(new_cert, cert)
    assert tls.context() is not first


def test_half_replaced_tls_files_keep_the_previous_context(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cert, key = make_pair(tmp_path, "first")
    tls = server.ServerTLS(str(cert), str(key), None, ssl.CERT_NONE, None,
                           logging.getLogger("test"))
    first = tls.context()
    _, other_key = make_pair(tmp_path, "second")
    os.replace(other_key, key)  # the new key is there, its certificate not yet
    with caplog.at_level(logging.WARNING):
        assert tls.context() is first
    assert "keep the previous certificate" in caplog.text


def test_without_usable_tls_files_there_is_no_context(tmp_path: Path) -> None:
    tls = server.ServerTLS(str(tmp_path / "none.crt"), str(tmp_path / "none.key"), None,
                           ssl.CERT_NONE, None, logging.getLogger("test"))
    with pytest.raises(OSError):
        tls.context()


def test_a_client_ca_makes_the_certificate_compulsory(tmp_path: Path) -> None:
    cert, key = make_pair(tmp_path, "hooks")
    tls = server.ServerTLS(str(cert), str(key), str(cert), ssl.CERT_REQUIRED, None,
                           logging.getLogger("test"))
    assert tls.context().verify_mode is ssl.CERT_REQUIRED


# --- a connection, over a transport of the test's ------------------------------------------


class Transport(asyncio.Transport):
    """What a connection writes, in order; at write number ``fail_after``, the socket fails as
    a reset one does in asyncio: the transport is closing at once, ``connection_lost`` comes
    later, and asyncio drops (and warns about) each write meanwhile."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.fail_after = fail_after
        self.closing = False
        self.protocol: server.Connection | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(
            name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))
        if len(self.written) == self.fail_after:
            self.lose()

    def lose(self) -> None:
        self.closing = True
        assert self.protocol is not None
        asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.lose()

    abort = close

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False


def connected(transport: Transport, app: Any = None, log: Any = None) -> server.Connection:
    front = server.Front(app, server.Settings(), keepalive=75.0, max_connections=10,
                         multiprocess=False, log=log or logging.getLogger("test"))
    front.access_log = log is not None  # the standard logger has no access()
    conn = server.Connection(front, server.Listener(None, probes=False))
    transport.protocol = conn
    conn.connection_made(transport)
    return conn


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: hooks\r\n\r\n"


def test_pipelined_requests_take_turns_with_the_rest_of_the_loop() -> None:
    """A client that pipelines many requests (and reads the answers at once) must not hold
    the loop until its read-ahead is answered: /healthz and the worker's heartbeat wait."""
    async def scenario() -> list[int]:
        transport = Transport()
        conn = connected(transport)
        conn.data_received(HEALTHZ * 50)
        answered_by_turn = []
        while len(transport.written) < 50:
            answered_by_turn.append(len(transport.written))
            await asyncio.sleep(0)  # one turn of the loop for everything else
        conn.eof_received()
        assert conn.task is not None
        await conn.task
        return [later - earlier for earlier, later in itertools.pairwise(answered_by_turn)]

    assert max(run(scenario())) <= 1


def test_no_answer_is_written_to_a_connection_that_failed() -> None:
    """asyncio reports a failed write later (``connection_lost``); meanwhile the pipelined
    requests of a client that went away are not answered into the void."""
    async def scenario() -> list[bytes]:
        transport = Transport(fail_after=2)
        conn = connected(transport)
        conn.data_received(HEALTHZ * 50)
        assert conn.task is not None
        await conn.task
        return transport.written

    assert len(run(scenario())) == 2


def exchange(data: bytes, app: Any = None, log: Any = None) -> tuple[bytes, bytes]:
    """The head and body of the first answer a connection writes to a client that sent
    ``data`` and closed its side."""
    async def scenario() -> bytes:
        transport = Transport()
        conn = connected(transport, app, log)
        conn.data_received(data)
        conn.eof_received()
        assert conn.task is not None
        await conn.task
        conn.front.hook_threads.shutdown()
        return b"".join(transport.written)

    head, _, body = run(scenario()).partition(b"\r\n\r\n")
    return head, body


def content_length(head: bytes) -> int:
    return int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")))


def test_an_answer_to_head_keeps_the_length_the_app_declared() -> None:
    app = create_app(server.Settings())
    _, body = exchange(b"GET /nowhere HTTP/1.1\r\nHost: hooks\r\n\r\n", app)
    head, nothing = exchange(b"HEAD /nowhere HTTP/1.1\r\nHost: hooks\r\n\r\n", app)
    assert head.startswith(b"HTTP/1.1 404 "), head
    assert (content_length(head), nothing) == (len(body), b"")
    assert json.loads(body)["error"] == "Not Found"


def test_a_refusal_to_head_is_sent_without_its_body() -> None:
    head, nothing = exchange(b"HEAD /sync HTTP/1.1\r\nHost: hooks\r\n"
                             b"Content-Length: 999999999999\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n"), head
    assert b"\r\nconnection: close" in head
    assert content_length(head) == len(server.too_large(server.Settings().max_body).body)
    assert nothing == b""


class AccessLog:
    """A logger that keeps what gunicorn's access log formats of each answer (its atoms)."""

    def __init__(self) -> None:
        self.gunicorn = glogging.Logger(Config())
        self.lines: list[dict[str, Any]] = []

    def access(self, resp: Any, req: Any, environ: dict[str, Any],
               request_time: datetime.timedelta) -> None:
        self.lines.append(self.gunicorn.atoms(resp, req, environ, request_time))

    def __getattr__(self, name: str) -> Any:
        return getattr(logging.getLogger("test"), name)


@pytest.mark.parametrize(("target", "status", "app"), [
    pytest.param(b"/healthz?probe=1", "200", None, id="answered-by-the-loop"),
    pytest.param(b"/nowhere?probe=1", "404", create_app, id="answered-by-the-app"),
])
def test_the_access_log_has_what_gunicorn_formats(target: bytes, status: str,
                                                   app: Any) -> None:
    log = AccessLog()
    _, body = exchange(b"GET " + target + b" HTTP/1.1\r\nHost: hooks\r\n"
                       b"User-Agent: kube-probe/1.29\r\n\r\n",
                       app and app(server.Settings()), log)
    (atoms,) = log.lines
    assert (atoms["r"], atoms["s"], atoms["h"], atoms["U"], atoms["q"], atoms["a"]) == (
        f"GET {target.decode()} HTTP/1.1", status, "127.0.0.1", target.decode().split("?")[0],
        "probe=1", "kube-probe/1.29")
    assert atoms["{user-agent}i"] == "kube-probe/1.29"
    assert atoms["b"] == str(len(body))
