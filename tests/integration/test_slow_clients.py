"""Slow and many clients against the real hook server as deploy/ runs it: nginx in front
(deploy/base/nginx.conf, here over plain HTTP; tests/integration/test_tls.py has its TLS) and
gunicorn's threads behind it. Clients that dribble their head or body hold no thread and are cut
off at nginx's timeouts, a body above the cap is refused unread, whatever nginx refuses itself
is answered in JSON, and syncs waiting on a cluster that never answers hold only that cluster's
share of the hook threads (``hooks.admission``), the others answered at once, so /healthz and
the calls for other clusters are answered meanwhile.

No test cluster is needed: the hooks called are customize, and syncs for a local listener that
accepts TCP connections and never speaks (a blackholed SSH host) or for a closed port. No
assertion is on elapsed time: each test shows what the server answered, and in what order.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest
import requests

from tests.driver import REPO, free_port, serving

CUSTOMIZE = (REPO / "examples/requests/customize.json").read_bytes()
JSON = {"Content-Type": "application/json"}
SLOW_CLIENTS = 50
"""More than the old server's 16 threads: each of them used to hold one."""
SHORT = 2.0
"""The header and body timeouts of the server that cuts clients off."""


STRICT = {"client_header_timeout": f"{SHORT:g}s", "client_body_timeout": f"{SHORT:g}s",
          "send_timeout": f"{SHORT:g}s", "client_max_body_size": "1m"}
"""nginx's limits in the server that cuts clients off."""


@pytest.fixture(scope="module")
def patient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose clients have a long time to send their head (their connections stay open
    while the test asks its questions)."""
    log = tmp_path_factory.mktemp("slow") / "gunicorn.log"
    with serving(log, front={"client_header_timeout": "60s"},
                 HPCBRIDGE_LOG_IMAGE="hpcbridge:test") as url:
        yield url
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with short header, body and send timeouts and a 1 MiB body cap."""
    log = tmp_path_factory.mktemp("strict") / "gunicorn.log"
    with serving(log, front=STRICT, HPCBRIDGE_LOG_IMAGE="hpcbridge:test") as url:
        yield url
    assert "Traceback" not in log.read_text(), log.read_text()


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


@contextmanager
def dribbling(url: str, n: int, *, every: float = 0.5) -> Iterator[list[socket.socket]]:
    """``n`` connections that each sent a request line and keep sending one header byte every
    ``every`` seconds, never ending their head."""
    stop = threading.Event()
    with ExitStack() as stack:
        conns = []
        for _ in range(n):
            conn = stack.enter_context(socket.create_connection(address(url), timeout=30))
            conn.sendall(b"POST /sync HTTP/1.1\r\nHost: hooks\r\nX-Slow: ")
            conns.append(conn)

        def drip() -> None:
            while not stop.wait(every):
                for conn in conns:
                    with suppress(OSError):
                        conn.send(b"z")

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        try:
            yield conns
        finally:
            stop.set()
            dripper.join()


def still_open_and_unanswered(conn: socket.socket) -> bool:
    timeout = conn.gettimeout()
    conn.settimeout(0)
    try:
        conn.recv(1, socket.MSG_PEEK)  # an answer, or b"" if the server closed it
    except BlockingIOError:
        return True
    finally:
        conn.settimeout(timeout)
    return False


def answer_of(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or resets it: nginx resets
    the connections it cuts off, ``reset_timedout_connection``)."""
    received = b""
    with suppress(ConnectionResetError):
        while chunk := conn.recv(65536):
            received += chunk
    return received


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def sync_for(host: str, port: int, *, namespace: str = "research",
             jump: tuple[str, int] | None = None) -> bytes:
    """A sync of a new BatchJob of ``namespace`` on ``host:port`` (behind the jump host
    ``jump``), with credentials of its own (so that each is a connect attempt of its own, not
    the pool's remembered failure)."""
    uid = str(uuid.uuid4())
    secret = {"metadata": {"name": "login", "namespace": namespace},
              "data": {"username": b64("u"), "password": b64(f"password-{uid}")}}
    hops = [{"host": jump[0], "port": jump[1], "insecureSkipHostKeyCheck": True}] if jump else []
    return json.dumps({"controller": {}, "parent": {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": f"job-{uid[:8]}", "namespace": namespace, "uid": uid,
                     "generation": 1},
        "spec": {"backend": "slurm", "script": "#!/bin/sh\ntrue\n",
                 "cluster": {"host": host, "port": port, "insecureSkipHostKeyCheck": True,
                             "secretRef": {"name": "login"}, "jump": hops}}},
        "children": {"Pod.v1": {}}, "related": {"Secret.v1": {"login": secret}},
        "finalizing": False}).encode()


# --- slow clients ------------------------------------------------------------------------


def test_dribbling_clients_leave_healthz_and_the_hooks_answered(patient: str) -> None:
    with dribbling(patient, SLOW_CLIENTS) as conns:
        time.sleep(1.0)  # a few bytes from each: every one of them is reading its head
        healthz = requests.get(f"{patient}/healthz", timeout=10)
        hook = requests.post(f"{patient}/customize", data=CUSTOMIZE, headers=JSON, timeout=10)
        assert all(still_open_and_unanswered(conn) for conn in conns)
    assert (healthz.status_code, healthz.json()) == (200, {"status": "ok"})
    assert hook.status_code == 200, hook.text
    assert hook.json()["relatedResources"][0]["resource"] == "secrets"


def test_a_client_that_dribbles_its_head_is_cut_off_at_the_header_timeout(strict: str) -> None:
    """Its bytes keep coming, but the timeout is for the whole head, not for each read."""
    with dribbling(strict, 1, every=SHORT / 8) as (conn,):
        assert answer_of(conn) == b""


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        assert answer_of(conn) == b""


def test_a_client_that_stalls_its_body_is_cut_off_at_the_body_timeout(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(b"POST /customize HTTP/1.1\r\nHost: hooks\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
        assert answer_of(conn) == b""


def test_clients_that_dribble_their_bodies_hold_no_thread(patient: str) -> None:
    """More of them than the hook threads: nginx holds their bodies until they are whole."""
    with ExitStack() as stack:
        for _ in range(SLOW_CLIENTS):
            conn = stack.enter_context(socket.create_connection(address(patient), timeout=30))
            conn.sendall(b"POST /customize HTTP/1.1\r\nHost: hooks\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
        hook = requests.post(f"{patient}/customize", data=CUSTOMIZE, headers=JSON, timeout=10)
    assert hook.status_code == 200, hook.text


def test_a_body_declared_above_the_cap_is_refused_unread(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(b"POST /sync HTTP/1.1\r\nHost: hooks\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1048577\r\n\r\n")
        answer = answer_of(conn)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n"), answer
    assert json.loads(body) == {"error": "Request Entity Too Large",
                                "message": "the request body is larger than the hooks accept"}


def test_a_chunked_body_growing_above_the_cap_is_refused(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(b"POST /sync HTTP/1.1\r\nHost: hooks\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        conn.sendall((b"10000\r\n" + b" " * 0x10000 + b"\r\n") * 17)  # 17 x 64 KiB: > 1 MiB
        answer = answer_of(conn)
    assert answer.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n"), answer[:200]


def test_a_request_framed_two_ways_is_refused(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(b"POST /customize HTTP/1.1\r\nHost: hooks\r\nContent-Length: 5\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        answer = answer_of(conn)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert json.loads(body) == {"error": "Bad Request",
                                "message": "the request is not well-formed HTTP"}


HEAD_TOO_LARGE = (400, {"error": "Bad Request",
                        "message": "the request head is larger than the hooks accept"})


@pytest.mark.parametrize(("head", "answer"), [
    pytest.param(b"POST /sync HTTP/1.1\r\nHost: hooks\r\nX-Big: " + b"a" * 9000 + b"\r\n",
                 HEAD_TOO_LARGE, id="a-header-line-above-8-KiB"),
    pytest.param(b"POST /sync HTTP/1.1\r\nHost: hooks\r\n"
                 + b"".join(b"X-%d: %s\r\n" % (n, b"a" * 7000) for n in range(6)),
                 HEAD_TOO_LARGE, id="headers-above-32-KiB"),
    pytest.param(b"POST /sync HTTP/1.1\r\nHost: hooks\r\nCookie: " + b"a" * 9000 + b"\r\n",
                 HEAD_TOO_LARGE, id="a-cookie-above-8-KiB"),
    pytest.param(b"POST /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: hooks\r\n",
                 (414, {"error": "Request-URI Too Large",
                        "message": "the request line is longer than the hooks accept"}),
                 id="a-request-line-above-8-KiB"),
    pytest.param(b"POST /sync HTTP/1.1\r\nHost: hooks\r\nTransfer-Encoding: gzip\r\n",
                 (501, {"error": "Not Implemented", "message": "the request uses a transfer "
                        "encoding the hooks do not accept"}), id="an-unknown-transfer-encoding"),
    pytest.param(b"POST /sync HTTP/2.0\r\nHost: hooks\r\n",
                 (505, {"error": "HTTP Version Not Supported",
                        "message": "the hooks speak HTTP/1.0 and HTTP/1.1"}),
                 id="an-http-version-it-does-not-speak"),
])
def test_every_refusal_of_the_front_is_json(
        strict: str, head: bytes, answer: tuple[int, dict[str, str]]) -> None:
    """nginx refuses these itself, before gunicorn sees them: with the same JSON as its other
    refusals, never its own HTML page."""
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(head + b"Connection: close\r\n\r\n")
        received = answer_of(conn)
    status, body = answer
    head_received, _, body_received = received.partition(b"\r\n\r\n")
    assert head_received.startswith(f"HTTP/1.1 {status} ".encode()), received[:300]
    assert b"\r\nContent-Type: application/json\r\n" in head_received + b"\r\n"
    assert json.loads(body_received) == body


def test_a_body_below_the_cap_is_answered_after_100_continue(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(b"POST /customize HTTP/1.1\r\nHost: hooks\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                     + f"Content-Length: {len(CUSTOMIZE)}\r\n\r\n".encode())
        assert conn.recv(65536).startswith(b"HTTP/1.1 100 Continue\r\n")
        conn.sendall(CUSTOMIZE)
        answer = answer_of(conn)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer
    assert b'"resource":"secrets"' in answer


def test_a_kept_alive_connection_serves_one_request_after_the_other(strict: str) -> None:
    session = requests.Session()
    for _ in range(3):
        assert session.post(f"{strict}/customize", data=CUSTOMIZE, headers=JSON,
                            timeout=10).status_code == 200
        assert session.get(f"{strict}/healthz", timeout=10).json() == {"status": "ok"}



# --- a cluster that never answers ----------------------------------------------------------


class Blackhole:
    """A TCP listener that accepts connections and never sends a byte, as an SSH host behind a
    firewall that drops its answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port: int = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            while True:
                self.held.append(self.sock.accept()[0])
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_syncs_stuck_on_one_cluster_leave_threads_for_the_others(tmp_path: Path) -> None:
    """Three hook threads, at most two per cluster: of four syncs for a cluster that never
    answers, two take a thread each and wait on their SSH connect, and the other two are
    answered at once with their status kept and a resync soon; a sync for another cluster takes
    the third thread and is answered while the two still wait, and so is /healthz."""
    blackhole = Blackhole()
    closed = free_port()
    try:
        with serving(tmp_path / "gunicorn.log", front={}, HPCBRIDGE_THREADS="3",
                     HPCBRIDGE_CLUSTER_THREADS="2", HPCBRIDGE_NAMESPACE_THREADS="3",
                     HPCBRIDGE_CONNECT_TIMEOUT="10",
                     HPCBRIDGE_LOG_IMAGE="hpcbridge:test") as url, \
                concurrent.futures.ThreadPoolExecutor(4) as pool:
            stuck = [pool.submit(requests.post, f"{url}/sync", headers=JSON, timeout=60,
                                 data=sync_for("127.0.0.1", blackhole.port)) for _ in range(4)]
            while len(blackhole.held) < 2:  # two of them are connecting
                time.sleep(0.05)
            busy = [next(concurrent.futures.as_completed(stuck, timeout=30)).result()
                    for _ in range(2)]
            other = requests.post(f"{url}/sync", data=sync_for("127.0.0.1", closed),
                                  headers=JSON, timeout=60)
            healthz = requests.get(f"{url}/healthz", timeout=10)
            waiting = sum(not future.done() for future in stuck)
            answers = [future.result() for future in stuck]
    finally:
        blackhole.close()
    assert waiting == 2
    assert [answer.json()["resyncAfterSeconds"] for answer in busy] == [5.0, 5.0]
    assert [answer.json()["status"]["phase"] for answer in busy] == ["Pending", "Pending"]
    assert other.status_code == 200, other.text
    assert "refused" in other.json()["status"]["message"], other.json()["status"]
    assert healthz.json() == {"status": "ok"}
    assert [answer.status_code for answer in answers] == [200] * 4
    assert sum("banner" in answer.json()["status"]["message"] for answer in answers) == 2
    assert len(blackhole.held) == 2  # two connected, never more
