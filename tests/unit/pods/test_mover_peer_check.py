"""The movers' S3 client against real sockets on 127.0.0.1: without the hooks' allowance
(``--endpoint-allowed``) every connection that leads to an address that is not public is closed
before TLS or any byte of a request, and the run fails ``StorageAccessDenied`` naming the
endpoint and the address — by address, by a name that resolves to loopback, and by a public name
whose lookup answers loopback (a record pointing inward, or rebinding); with it, the same store
answers."""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from minio import Minio

from hooks.core.values.reasons import Reason
from hooks.pods.movers import store
from hooks.pods.movers.errors import MoveError

BODY = b"the store's answer\n"


@dataclass
class Store:
    """A stand-in object store on 127.0.0.1 that answers every GET and HEAD with ``BODY``
    and records each request line."""

    port: int
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def s3_store() -> Iterator[Store]:
    found = Store(0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(BODY)

        def do_HEAD(self) -> None:
            self._answer(b"")

        def _answer(self, body: bytes) -> None:
            found.requests.append(self.requestline)
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.send_header("ETag", f'"{hashlib.md5(BODY, usedforsecurity=False).hexdigest()}"')
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    (tmp_path / "AWS_ACCESS_KEY_ID").write_text("reader\n")
    (tmp_path / "AWS_SECRET_ACCESS_KEY").write_text("not-a-real-key\n")
    return tmp_path


def fetch(s3: Minio) -> bytes:
    size, _, chunks = store.download(s3, "data", "runs/42/params.json")
    got = b"".join(chunks)
    assert len(got) == size
    return got


def refused(s3: Minio) -> MoveError:
    with pytest.raises(MoveError) as caught:
        fetch(s3)
    assert caught.value.reason is Reason.STORAGE_ACCESS_DENIED
    return caught.value


def test_a_loopback_store_is_refused_before_any_request(s3_store: Store, keys: Path) -> None:
    endpoint = f"http://127.0.0.1:{s3_store.port}"
    err = refused(store.client(endpoint, "", keys))
    assert endpoint in err.message and "loopback address 127.0.0.1" in err.message
    assert "HPCBRIDGE_S3_ENDPOINTS" in err.message
    assert s3_store.requests == []


def test_the_same_store_answers_when_the_hooks_allow_it(s3_store: Store, keys: Path) -> None:
    s3 = store.client(f"http://127.0.0.1:{s3_store.port}", "", keys, allowed=True)
    assert fetch(s3) == BODY
    assert s3_store.requests == ["GET /data/runs/42/params.json HTTP/1.1"]


def test_a_name_that_resolves_to_loopback_is_refused(s3_store: Store, keys: Path) -> None:
    err = refused(store.client(f"http://localhost:{s3_store.port}", "", keys))
    assert f"http://localhost:{s3_store.port}" in err.message and "127.0.0.1" in err.message
    assert s3_store.requests == []


def test_a_public_name_answered_inward_is_refused_at_the_connection(
        s3_store: Store, keys: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The name passes the hooks' rules; its lookup then answers 127.0.0.1 (a record that
    points inward, or a rebinding answer after a public one): the connected peer is what
    counts."""
    lookup = socket.getaddrinfo
    answers = iter(["93.184.215.14", "127.0.0.1", "127.0.0.1"])

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "store.example.org":
            return lookup(next(answers), *args, **kwargs)
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    assert socket.getaddrinfo("store.example.org", 80)[0][4][0] == "93.184.215.14"
    err = refused(store.client(f"http://store.example.org:{s3_store.port}", "", keys))
    assert "store.example.org" in err.message and "127.0.0.1" in err.message
    assert s3_store.requests == []
    allowed = store.client(f"http://store.example.org:{s3_store.port}", "", keys, allowed=True)
    assert fetch(allowed) == BODY


def test_every_call_of_the_movers_is_checked(s3_store: Store, keys: Path) -> None:
    """The outputs mover's stat and the inputs mover's listing too: a refusal, never an
    error to retry or a missing object."""
    s3 = store.client(f"http://127.0.0.1:{s3_store.port}", "", keys)
    for call in (lambda: store.stored(s3, "results", "a.h5"),
                 lambda: list(store.objects(s3, "data", "runs/"))):
        with pytest.raises(MoveError) as caught:
            call()
        assert caught.value.reason is Reason.STORAGE_ACCESS_DENIED
    assert s3_store.requests == []


def test_a_redirect_is_not_followed_even_from_an_allowed_store(keys: Path,
                                                               s3_store: Store) -> None:
    """An allowance covers its endpoint alone: an allowed store that answers with a redirect
    (to another store on loopback here) is not followed there."""
    redirects: list[str] = []

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            redirects.append(self.requestline)
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{s3_store.port}/data/secret")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        s3 = store.client(f"http://127.0.0.1:{server.server_address[1]}", "", keys,
                          allowed=True)
        with pytest.raises(MoveError) as caught:
            fetch(s3)
        assert caught.value.reason is Reason.NONE
        assert redirects and s3_store.requests == []
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_https_is_refused_before_the_handshake(keys: Path) -> None:
    """Not a byte reaches the peer: no TLS ClientHello, no server name."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def accept() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(2)
            try:
                received.append(conn.recv(4096))
            except TimeoutError:
                received.append(b"")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        port = listener.getsockname()[1]
        err = refused(store.client(f"https://127.0.0.1:{port}", "", keys))
        assert f"https://127.0.0.1:{port}" in err.message
        thread.join(10)
        assert received == [b""]
    finally:
        listener.close()


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 on this machine")
def test_an_ipv6_loopback_store_is_refused(keys: Path) -> None:
    try:
        listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with listener:
        port = listener.getsockname()[1]
        err = refused(store.client(f"http://[::1]:{port}", "", keys))
        assert f"http://[::1]:{port}" in err.message and "loopback address ::1" in err.message
