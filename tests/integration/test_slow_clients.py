"""Slow and many clients against the real hook server (gunicorn with the product's settings):
clients that dribble their head or body hold no thread and are cut off at their deadline, a body
above the cap is refused unread, and syncs waiting on a cluster that never answers hold only
that cluster's share of the hook threads, so /healthz and the calls for other clusters are
answered meanwhile.

No test cluster is needed: the hooks called are customize, and syncs for a local listener that
accepts TCP connections and never speaks (a blackholed SSH host) or for a closed port. No
assertion is on elapsed time: each test shows what the server answered, and in what order.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import select
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


@pytest.fixture(scope="module")
def patient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose clients have a long time to send their head (their connections stay open
    while the test asks its questions)."""
    log = tmp_path_factory.mktemp("slow") / "gunicorn.log"
    with serving(log, HPCBRIDGE_HEADER_TIMEOUT="60", HPCBRIDGE_LOG_IMAGE="hpcbridge:test") as url:
        yield url
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with short header and body timeouts and a 1 MiB body cap."""
    log = tmp_path_factory.mktemp("strict") / "gunicorn.log"
    with serving(log, HPCBRIDGE_HEADER_TIMEOUT=str(SHORT), HPCBRIDGE_BODY_TIMEOUT=str(SHORT),
                 HPCBRIDGE_MAX_BODY=str(1024 * 1024), HPCBRIDGE_LOG_IMAGE="hpcbridge:test") as url:
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
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    return received


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def sync_for(host: str, port: int) -> bytes:
    """A sync of a new BatchJob on ``host:port``, with credentials of its own (so that each is
    a connect attempt of its own, not the pool's remembered failure)."""
    uid = str(uuid.uuid4())
    secret = {"metadata": {"name": "login", "namespace": "research"},
              "data": {"username": b64("u"), "password": b64(f"password-{uid}")}}
    return json.dumps({"controller": {}, "parent": {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
        "metadata": {"name": f"job-{uid[:8]}", "namespace": "research", "uid": uid,
                     "generation": 1},
        "spec": {"backend": "slurm", "script": "#!/bin/sh\ntrue\n",
                 "cluster": {"host": host, "port": port, "insecureSkipHostKeyCheck": True,
                             "secretRef": {"name": "login"}}}},
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
    """Its bytes keep coming, but the deadline is for the whole head, not for each read."""
    with dribbling(strict, 1, every=SHORT / 8) as (conn,):
        answer = answer_of(conn)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert answer.endswith(b'"message":"the request\'s head did not arrive within 2 s"}')
    assert b"\r\nconnection: close\r\n" in answer


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        assert answer_of(conn) == b""


def test_a_client_that_dribbles_its_body_is_cut_off_at_the_body_timeout(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(b"POST /customize HTTP/1.1\r\nHost: hooks\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
        stop = threading.Event()

        def drip() -> None:
            while not stop.wait(SHORT / 8):
                try:
                    conn.send(b" ")
                except OSError:
                    return

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        try:
            answer = answer_of(conn)
        finally:
            stop.set()
            dripper.join()
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert answer.endswith(b'"message":"the request\'s body did not arrive within 2 s"}')


def test_a_body_declared_above_the_cap_is_refused_unread(strict: str) -> None:
    with socket.create_connection(address(strict), timeout=30) as conn:
        conn.sendall(b"POST /sync HTTP/1.1\r\nHost: hooks\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1048577\r\n\r\n")
        answer = answer_of(conn)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n"), answer
    assert json.loads(body) == {"error": "Request Entity Too Large", "message":
                                "the request body exceeds 1048576 bytes (HPCBRIDGE_MAX_BODY)"}


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
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert b"both Content-Length and Transfer-Encoding" in answer


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



def tcp_state(conn: socket.socket) -> int:
    """The kernel's state of a TCP socket (Linux's ``tcp_info.tcpi_state``)."""
    return conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def test_a_client_that_reads_no_answer_is_let_go(strict: str) -> None:
    """A client pipelines requests and never reads the answers. Once they fill the socket's
    buffers and the client has read none for the header timeout, the server drops the
    connection: closing it the polite way would wait for the client to read, and so keep its
    socket and buffers, outside worker_connections, for as long as the client likes."""
    established, pipeline = 1, b"GET /healthz HTTP/1.1\r\nHost: hooks\r\n\r\n" * 100_000
    with socket.socket() as conn:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window from the start
        conn.connect(address(strict))
        conn.setblocking(False)
        sent = 0
        while sent < len(pipeline) and select.select([], [conn], [], 2.0)[1]:
            with suppress(BlockingIOError):
                sent += conn.send(pipeline[sent:])
        for _ in range(600):  # a bound for a failing server only; the test takes what it takes
            if tcp_state(conn) != established:
                break
            time.sleep(0.1)
        assert tcp_state(conn) != established


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
    """Three hook threads, at most two per cluster: four syncs stuck connecting to one cluster
    take two threads; a sync for another cluster takes the third and is answered while all four
    are still waiting, and so is /healthz."""
    blackhole = Blackhole()
    closed = free_port()
    try:
        with serving(tmp_path / "gunicorn.log", HPCBRIDGE_THREADS="3",
                     HPCBRIDGE_CLUSTER_THREADS="2", HPCBRIDGE_CONNECT_TIMEOUT="10",
                     HPCBRIDGE_LOG_IMAGE="hpcbridge:test") as url, \
                concurrent.futures.ThreadPoolExecutor(4) as pool:
            stuck = [pool.submit(requests.post, f"{url}/sync", headers=JSON, timeout=60,
                                 data=sync_for("127.0.0.1", blackhole.port)) for _ in range(4)]
            while len(blackhole.held) < 2:  # two of them are connecting
                time.sleep(0.05)
            other = requests.post(f"{url}/sync", data=sync_for("127.0.0.1", closed),
                                  headers=JSON, timeout=60)
            healthz = requests.get(f"{url}/healthz", timeout=10)
            waiting = sum(not future.done() for future in stuck)
            answers = [future.result() for future in stuck]
    finally:
        blackhole.close()
    assert waiting == 4
    assert other.status_code == 200, other.text
    assert "refused" in other.json()["status"]["message"], other.json()["status"]
    assert healthz.json() == {"status": "ok"}
    assert [answer.status_code for answer in answers] == [200] * 4
    assert all("banner" in answer.json()["status"]["message"] for answer in answers)
    # Two connected at a time, never more; the last two were answered with the host's
    # remembered failure without connecting again.
    assert len(blackhole.held) == 2


def hook_calls(url: str, hook: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(f'hpcbridge_hook_requests_total{{hook="{hook}"'))


def test_a_call_whose_client_closes_while_it_waits_is_dropped(tmp_path: Path) -> None:
    """One hook thread per cluster: sync A holds it, stuck on a cluster that never answers;
    sync B waits for it, and its client closes the connection (as Go's client does at its
    timeout) over plain HTTP. B is dropped: after A, only C (sent last) runs."""
    blackhole = Blackhole()
    try:
        with serving(tmp_path / "gunicorn.log", HPCBRIDGE_THREADS="2",
                     HPCBRIDGE_CLUSTER_THREADS="1", HPCBRIDGE_CONNECT_TIMEOUT="5",
                     HPCBRIDGE_LOG_IMAGE="hpcbridge:test") as url, \
                concurrent.futures.ThreadPoolExecutor(2) as pool:
            before = hook_calls(url, "sync")
            first = pool.submit(requests.post, f"{url}/sync", headers=JSON, timeout=60,
                                data=sync_for("127.0.0.1", blackhole.port))
            while not blackhole.held:  # A is connecting
                time.sleep(0.05)
            body = sync_for("127.0.0.1", blackhole.port)
            with socket.create_connection(address(url), timeout=30) as waiting:
                waiting.sendall(b"POST /sync HTTP/1.1\r\nHost: hooks\r\n"
                                b"Content-Type: application/json\r\n"
                                + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                time.sleep(0.5)  # read by the server, and waiting for A's thread
            last = pool.submit(requests.post, f"{url}/sync", headers=JSON, timeout=60,
                               data=sync_for("127.0.0.1", blackhole.port))
            assert first.result().status_code == last.result().status_code == 200
            assert hook_calls(url, "sync") == before + 2
    finally:
        blackhole.close()

