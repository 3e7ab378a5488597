"""The hook server's front: in each gunicorn worker process, an asyncio loop reads every request
whole, within deadlines, before a thread runs the Flask app for it.

gunicorn (``hooks/gunicorn_conf.py``: ``worker_class = "hooks.server.Worker"``) binds the ports,
starts and watches the worker processes and reopens the logs. In each worker process:

* **The hook loop** (the main thread) accepts the hook port's connections, does their TLS
  handshakes and reads each request: its head within ``HPCBRIDGE_HEADER_TIMEOUT`` (from the
  connection's start, TLS handshake included, or from the first byte of a later request on a
  kept-alive connection), its body within ``HPCBRIDGE_BODY_TIMEOUT`` from the end of the head.
  A body declared or grown above ``HPCBRIDGE_MAX_BODY`` is answered 413 without being read; a
  client that misses a deadline is answered 408 and disconnected. The loop answers
  ``GET /healthz`` itself and writes every answer. A slow or idle client holds a socket and a
  coroutine, never a thread.
* **The hook threads** (``HPCBRIDGE_THREADS``) run the app for requests read whole. They are
  the only threads that may wait on SSH. A call for a cluster (``host:port`` of the cluster the
  BatchJob's attempt runs on, else of its spec) takes one only while fewer than
  ``HPCBRIDGE_CLUSTER_THREADS`` calls for that cluster hold one; otherwise it waits in the loop,
  holding no thread, in order of arrival, and is dropped if its client goes away. A cluster that
  stalls fills its own share, never the threads of the other clusters.
* **The probes' loop** (a thread of its own) serves the probes' port
  (``HPCBRIDGE_METRICS_PORT``): plain HTTP, ``GET /healthz`` (answered by the loop) and
  ``GET /metrics`` only, so that the kubelet probes without a client certificate and no burst of
  TLS handshakes on the hook port delays a probe.
* **One metrics thread** per loop runs ``/metrics``, so that a scrape never waits for a hook.

Request bodies held at once (being read, or being answered) are capped at ``BODY_BUDGET``
times ``HPCBRIDGE_MAX_BODY``; a request beyond that is answered 503 without being read, so that
many large requests cannot exhaust memory. Connections per loop are capped at gunicorn's
``worker_connections``; one beyond is closed at once.

TLS comes from gunicorn's settings (``certfile``, ``keyfile``, ``ca_certs``, ``cert_reqs``):
the context is built again when one of the files changes, so that renewed certificates are
used without a restart. With a client CA the handshake itself requires a certificate that CA
signed (``CERT_REQUIRED``); the verified certificate reaches the app as
``environ["hpcbridge.peer_certificate"]`` (``hooks.auth``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import email.utils
import http
import io
import os
import signal
import socket
import ssl
import sys
import threading
import time
import types
import urllib.parse
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import h11
import orjson
from gunicorn.workers.base import Worker as GunicornWorker

from hooks import auth
from hooks.settings import Settings

MAX_HEAD = 64 * 1024
"""Bytes a request's head (request line and headers) may have: 431 beyond."""
READ_AHEAD = 64 * 1024
"""Bytes read from a client ahead of the parser before reading from it pauses."""
RECEIVE_BUFFER = 32 * 1024
"""The kernel's receive buffer of each accepted socket (``SO_RCVBUF``, which Linux doubles):
it bounds one read, so that a connection holds at most about ``READ_AHEAD`` plus 64 KiB of
what its client sent ahead (1000 connections: well under the Pod's memory limit)."""
BODY_BUDGET = 8
"""Request bodies held at once, in multiples of ``HPCBRIDGE_MAX_BODY``."""
LANE_PARSE_LIMIT = 1024 * 1024
"""Bodies up to this size are parsed on the loop for their cluster (a few ms at most); larger
ones, which no real call sends, share one lane."""
LINGER = 2.0
"""Seconds a connection refused before its request was read whole keeps reading (and
dropping) what the client still sends, after the answer: closing at once with unread data
would reset the connection and could destroy the answer on its way."""
WARN_EVERY = 10.0
LANE_PATHS = frozenset({"/sync", "/finalize"})
"""The hooks that may contact a cluster: their calls are admitted by cluster."""
PROBE_PATHS = frozenset({"/healthz", "/metrics"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                        "transfer-encoding", "upgrade"})
"""Headers of the app's answers that the front leaves out: they are the connection's, and the
front writes its own."""
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Headers = list[tuple[bytes, bytes]]


def probe_port(env: Mapping[str, str]) -> int | None:
    """The plain port of /healthz and /metrics (``HPCBRIDGE_METRICS_PORT``), or None."""
    text = env.get("HPCBRIDGE_METRICS_PORT") or None
    if text is None:
        return None
    if not text.isdigit() or not 0 < int(text) < 65536 or text == env.get("PORT", "8080"):
        raise ValueError(f"HPCBRIDGE_METRICS_PORT={text!r} is not a free port number beside PORT")
    return int(text)


def cluster_of(path: str, body: bytes) -> str:
    """The lane of a call: ``host:port`` of the cluster a sync or finalize contacts (the one its
    attempt under way runs on, as its status says, else the one its spec names), or ``""`` (one
    lane for every other call)."""
    if path not in LANE_PATHS or len(body) > LANE_PARSE_LIMIT:
        return ""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    parent = request.get("parent", request.get("object")) if isinstance(request, dict) else None
    if not isinstance(parent, dict):
        return ""
    cluster = None
    for part in ("status", "spec"):
        section = parent.get(part)
        named = section.get("cluster") if isinstance(section, dict) else None
        if isinstance(named, dict) and isinstance(named.get("host"), str):
            cluster = named
            break
    if cluster is None:
        return ""
    port = cluster.get("port", 22)
    if not isinstance(port, int) or isinstance(port, bool):
        port = 22  # an invalid spec: the app refuses it without contacting a cluster
    return f"{cluster['host'][:253].lower()}:{port}"


@dataclass
class Answer:
    status: int
    body: bytes = b""
    headers: Headers = field(default_factory=list)
    reason: bytes = b""
    close: bool = False
    length: int | None = None
    """The Content-Length the app declared, which an answer to HEAD keeps without its body."""


def json_answer(status: int, error: str, message: str, *, close: bool = False,
                headers: Headers | None = None) -> Answer:
    """An answer in the app's error form: ``{"error": …, "message": …}``."""
    return Answer(status, orjson.dumps({"error": error, "message": message}),
                  [(b"content-type", b"application/json"), *(headers or [])], close=close)


HEALTHZ = Answer(200, b'{"status":"ok"}', [(b"content-type", b"application/json")])


def call_app(app: WSGIApp, environ: dict[str, Any], log: Any) -> Answer:
    """Run the WSGI app for one request read whole (in a thread); its answer, collected."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Callable[[bytes], None]:
        started[:] = [status, headers]
        return chunks.append

    try:
        result = app(environ, start_response)
        try:
            chunks.extend(chunk for chunk in result if chunk)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers = started
        code, _, reason = status.partition(" ")
        kept: Headers = []
        length = None
        for key, value in headers:
            name = key.lower()
            if name == "content-length":
                length = int(value) if value.isascii() and value.isdigit() else None
            elif name not in HOP_BY_HOP:
                kept.append((name.encode("latin-1"), value.encode("latin-1")))
        return Answer(int(code), b"".join(chunks), kept, reason.encode("latin-1"),
                      length=length)
    except Exception:
        log.exception("Error handling request %s %s", environ["REQUEST_METHOD"],
                      environ["RAW_URI"])
        return json_answer(500, "internal error", "see the hook server's log")


class Gate:
    """Admission to the hook threads, in order of arrival: at most ``total`` calls at once,
    and at most ``per_lane`` of one lane."""

    def __init__(self, total: int, per_lane: int) -> None:
        self.total, self.per_lane = total, per_lane
        self.running = 0
        self.lanes: Counter[str] = Counter()
        self.waiting: deque[tuple[str, asyncio.Future[None]]] = deque()

    async def enter(self, lane: str) -> None:
        """Wait until the call may take a thread; cancelled, it waits no more."""
        if self.running < self.total and self.lanes[lane] < self.per_lane:
            self._take(lane)
            return
        entry = (lane, asyncio.get_running_loop().create_future())
        self.waiting.append(entry)
        try:
            await entry[1]
        except asyncio.CancelledError:
            if entry[1].done() and not entry[1].cancelled():
                self.leave(lane)  # admitted just as its client went away
            else:
                self.waiting.remove(entry)
            raise

    def leave(self, lane: str) -> None:
        self.running -= 1
        self.lanes[lane] -= 1
        if not self.lanes[lane]:
            del self.lanes[lane]
        for entry in list(self.waiting):
            if self.running >= self.total:
                break
            waiting_lane, future = entry
            if self.lanes[waiting_lane] < self.per_lane:
                self.waiting.remove(entry)
                self._take(waiting_lane)
                future.set_result(None)

    def _take(self, lane: str) -> None:
        self.running += 1
        self.lanes[lane] += 1


class ServerTLS:
    """The TLS context of the hook port, built again when a file it was built from changes."""

    def __init__(self, certfile: str, keyfile: str, ca_certs: str | None, cert_reqs: int,
                 ciphers: str | None, log: Any) -> None:
        self.files = tuple(f for f in (certfile, keyfile, ca_certs) if f)
        self.certfile, self.keyfile, self.ca_certs = certfile, keyfile, ca_certs
        self.cert_reqs, self.ciphers, self.log = ssl.VerifyMode(cert_reqs), ciphers, log
        self._stamp: tuple[object, ...] | None = None
        self._context: ssl.SSLContext | None = None

    def context(self) -> ssl.SSLContext:
        """The current context; a rebuild that fails keeps the previous one (the files may be
        half replaced) and is tried again on the next connection. Raises when there is none."""
        stamp = tuple(self._stat(f) for f in self.files)
        if stamp != self._stamp or self._context is None:
            try:
                self._context = self._build()
                self._stamp = stamp
            except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
                if self._context is None:
                    raise
                self.log.warning("the TLS files could not be loaded again (%s); new connections "
                                 "keep the previous certificate", error)
        return self._context

    def _build(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.ca_certs)
        context.load_cert_chain(certfile=self.certfile, keyfile=self.keyfile)
        context.verify_mode = self.cert_reqs
        context.set_alpn_protocols(["http/1.1"])
        if self.ciphers:
            context.set_ciphers(self.ciphers)
        return context

    @staticmethod
    def _stat(path: str) -> object:
        try:
            info = os.stat(path)  # follows the symlinks of a mounted Secret
        except OSError:
            return None
        return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


@dataclass
class Listener:
    tls: ServerTLS | None
    probes: bool
    """The probes' port: plain HTTP, /healthz and /metrics only."""


class Front:
    """What the connections of one loop share: the app, the threads and the limits."""

    def __init__(self, app: WSGIApp, settings: Settings, *, keepalive: float,
                 max_connections: int, multiprocess: bool, log: Any) -> None:
        self.app, self.log = app, log
        self.header_timeout, self.body_timeout = settings.header_timeout, settings.body_timeout
        self.max_body = settings.max_body
        self.body_budget = BODY_BUDGET * settings.max_body
        self.keepalive = keepalive
        self.max_connections = max_connections
        self.multiprocess = multiprocess
        self.gate = Gate(settings.threads, settings.cluster_threads)
        self.hook_threads = concurrent.futures.ThreadPoolExecutor(
            settings.threads, thread_name_prefix="hook")
        self.metrics_thread = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="metrics")
        self.connections: set[Connection] = set()
        self.body_bytes = 0
        self.stopping = False
        self.access_log = bool(getattr(log, "access_log_enabled", True))
        self._date = (0, b"")
        self._warnings: dict[str, tuple[float, int]] = {}

    async def run_hook(self, conn: Connection, environ: dict[str, Any], lane: str) -> Answer:
        loop = asyncio.get_running_loop()
        conn.queued = True
        try:
            await self.gate.enter(lane)  # cancelled if the client goes away meanwhile
        finally:
            conn.queued = False
        try:
            return await loop.run_in_executor(self.hook_threads, call_app, self.app, environ,
                                              self.log)
        finally:
            self.gate.leave(lane)

    async def run_metrics(self, environ: dict[str, Any]) -> Answer:
        return await asyncio.get_running_loop().run_in_executor(
            self.metrics_thread, call_app, self.app, environ, self.log)

    def warn(self, message: str, *args: object) -> None:
        """A warning of a kind that may come in floods (a client that fails its handshake, a
        limit reached): each ``message`` at most once every ``WARN_EVERY`` seconds, with how
        many were left out."""
        now = time.monotonic()
        due, left_out = self._warnings.get(message, (0.0, 0))
        if now < due:
            self._warnings[message] = (due, left_out + 1)
            return
        self._warnings[message] = (now + WARN_EVERY, 0)
        more = f" ({left_out} more like it in the last {WARN_EVERY:g} s)" if left_out else ""
        self.log.warning(message + more, *args)

    def date(self) -> bytes:
        now = int(time.time())
        if now != self._date[0]:
            self._date = (now, email.utils.formatdate(now, usegmt=True).encode())
        return self._date[1]

    async def stop(self, grace: float) -> None:
        """Serve the requests under way for at most ``grace`` seconds; close the rest."""
        self.stopping = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self.connections and loop.time() < deadline:
            for conn in list(self.connections):
                if conn.idle:
                    conn.close()
            await asyncio.sleep(0.1)
        for conn in list(self.connections):
            conn.close()
        self.hook_threads.shutdown(wait=False, cancel_futures=True)
        self.metrics_thread.shutdown(wait=False, cancel_futures=True)


class Timeout(Exception):
    """A client missed its deadline."""


class Connection(asyncio.Protocol):
    """One client connection: its TLS handshake, then its requests one after the other."""

    def __init__(self, front: Front, listener: Listener) -> None:
        self.front, self.listener = front, listener
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("", 0)
        self.peer_certificate: dict[str, Any] | None = None
        self.inbox = bytearray()
        self.eof = self.lost = self.reading_paused = False
        self.readable = asyncio.Event()
        self.writable = asyncio.Event()
        self.writable.set()
        self.idle = self.queued = False
        self.reserved = 0
        self.task: asyncio.Task[None] | None = None

    # -- asyncio's callbacks ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)
        if len(self.front.connections) >= self.front.max_connections:
            self.front.warn("refused connections: %d are open (worker_connections)",
                            len(self.front.connections))
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        if self.listener.tls is not None:
            transport.pause_reading()  # until the handshake takes the connection over
        self.front.connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self.serve())

    def data_received(self, data: bytes) -> None:
        self.inbox += data
        self.readable.set()
        if len(self.inbox) > READ_AHEAD and not self.reading_paused and self.transport:
            self.reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.eof = True
        self.readable.set()
        if self.queued and self.task is not None:
            self.task.cancel()  # a client that closed its side while its call waits: gone
        # Plain TCP stays half open, for the answer to a request complete before the EOF;
        # asyncio's TLS transport cannot.
        return self.listener.tls is None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.readable.set()
        self.writable.set()
        if self.queued and self.task is not None:
            self.task.cancel()  # waiting for a hook thread: nobody waits for its answer

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def close(self) -> None:
        """Close once what was written is sent; reset the connection if that is not read
        within the header timeout (else a client that reads nothing keeps its socket open for
        as long as it likes, outside ``worker_connections``)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
            asyncio.get_running_loop().call_later(self.front.header_timeout, self.reset)

    def reset(self) -> None:
        if not self.lost and self.transport is not None:
            self.transport.abort()

    # -- the connection ---------------------------------------------------------------------

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            deadline = loop.time() + self.front.header_timeout
            if self.listener.tls is None or await self.handshake(self.listener.tls, deadline):
                await self.requests(deadline)
        except asyncio.CancelledError:
            pass
        except Exception:
            self.front.log.exception("Error handling the connection from ip=%s", self.peer[0])
        finally:
            self.front.connections.discard(self)
            self.release()
            self.close()

    async def handshake(self, tls: ServerTLS, deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        raw = self.transport
        assert raw is not None
        try:
            context = tls.context()
        except (OSError, ValueError) as error:
            self.front.log.error("no TLS context for the connection from ip=%s: %s",
                                 self.peer[0], error)
            return False
        try:
            transport = await loop.start_tls(
                raw, self, context, server_side=True,
                ssl_handshake_timeout=max(0.01, deadline - loop.time()))
        except ssl.SSLError as error:
            self.front.warn("TLS handshake with ip=%s failed: %s", self.peer[0], error)
            return False
        except (TimeoutError, OSError) as error:
            self.front.log.debug("TLS handshake with ip=%s ended: %s", self.peer[0], error)
            return False
        if transport is None:
            return False
        self.transport = transport
        certificate = transport.get_extra_info("peercert")
        self.peer_certificate = certificate if isinstance(certificate, dict) else None
        return True

    async def requests(self, deadline: float) -> None:
        """Read, answer, and read the next request while the connection is kept alive."""
        loop = asyncio.get_running_loop()
        h = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        first = True
        while True:
            if not h.trailing_data[0] and not self.inbox:
                # Idle: a new connection until its first byte (within the header deadline), a
                # kept-alive one until the first byte of its next request.
                if self.front.stopping and not first:
                    return
                self.idle = True
                try:
                    await self.receivable(deadline if first
                                          else loop.time() + self.front.keepalive)
                except Timeout:
                    return
                finally:
                    self.idle = False
                if not self.inbox:
                    return  # the client closed the connection
            if not first:
                deadline = loop.time() + self.front.header_timeout
            first = False
            read = await self.read_request(h, deadline)
            if read is None:
                return
            request, body = read
            started = time.perf_counter()
            environ = self.environ(request, body)
            answer = await self.answer(environ, body)
            self.release()
            if not await self.send(h, request, environ, answer, time.perf_counter() - started):
                return
            if h.our_state is not h11.DONE or h.their_state is not h11.DONE:
                return
            h.start_next_cycle()
            # Pipelined requests take turns with the other connections (and with the news that
            # this one was lost), else a client's read-ahead would hold the loop for seconds.
            await asyncio.sleep(0)

    async def read_request(self, h: h11.Connection,
                           deadline: float) -> tuple[h11.Request, bytes] | None:
        """The next request, head and body; None when the connection is to close (after an
        error answer, if one was due)."""
        loop = asyncio.get_running_loop()
        request: h11.Request | None = None
        body = bytearray()
        continued = False
        while True:
            try:
                event = h.next_event()
            except h11.RemoteProtocolError as error:
                self.front.log.debug("bad request from ip=%s: %s", self.peer[0], error)
                if not self.eof:  # else the client left halfway: nobody reads an answer
                    await self.refuse(h, request, json_answer(
                        error.error_status_hint, "Bad Request", str(error)))
                return None
            if event is h11.NEED_DATA:
                if request is not None and h.they_are_waiting_for_100_continue and not continued:
                    continued = True
                    self.write(h.send(h11.InformationalResponse(status_code=100, headers=[],
                                                                reason=b"Continue")))
                try:
                    data = await self.receive(deadline)
                except Timeout:
                    part, seconds = (("head", self.front.header_timeout) if request is None
                                     else ("body", self.front.body_timeout))
                    self.front.log.debug("closing the connection from ip=%s: no complete "
                                         "request %s within %g s", self.peer[0], part, seconds)
                    await self.refuse(h, request, json_answer(
                        408, "Request Timeout",
                        f"the request's {part} did not arrive within {seconds:g} s"))
                    return None
                h.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
                names = {name for name, _ in event.headers}
                if b"content-length" in names and b"transfer-encoding" in names:
                    await self.refuse(h, request, json_answer(
                        400, "Bad Request",  # RFC 9112 6.1: a smuggling attempt
                        "a request cannot have both Content-Length and Transfer-Encoding"))
                    return None
                declared = content_length(event)
                refusal = self.reserve(declared if declared is not None else 0,
                                       chunked=declared is None)
                if refusal is not None:
                    await self.refuse(h, request, refusal)
                    return None
                deadline = loop.time() + self.front.body_timeout
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.front.max_body:
                    await self.refuse(h, request, too_large(self.front.max_body))
                    return None
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body)
            else:  # ConnectionClosed, or PAUSED (cannot happen: one request at a time)
                return None

    def reserve(self, declared: int, *, chunked: bool) -> Answer | None:
        """Room for a body of ``declared`` bytes (a chunked one: up to the cap) among the
        bodies held at once; the refusal otherwise."""
        if declared > self.front.max_body:
            return too_large(self.front.max_body)
        wanted = self.front.max_body if chunked else declared
        if self.front.body_bytes + wanted > self.front.body_budget:
            self.front.warn("answered requests 503: %d bytes of request bodies are held "
                            "already", self.front.body_bytes)
            return json_answer(503, "Service Unavailable",
                               "the server holds too many request bodies; try again",
                               close=True, headers=[(b"retry-after", b"1")])
        self.front.body_bytes += wanted
        self.reserved = wanted
        return None

    def release(self) -> None:
        self.front.body_bytes -= self.reserved
        self.reserved = 0

    async def answer(self, environ: dict[str, Any], body: bytes) -> Answer:
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        if path == "/healthz" and method in ("GET", "HEAD"):
            return HEALTHZ
        if self.listener.probes:
            if method not in ("GET", "HEAD"):
                return json_answer(405, "Method Not Allowed", "the probes' port only answers "
                                   "GET", headers=[(b"allow", b"GET, HEAD")])
            if path not in PROBE_PATHS:
                return json_answer(404, "Not Found", "the probes' port serves /healthz and "
                                   "/metrics only")
        if path == "/metrics" and method in ("GET", "HEAD"):
            return await self.front.run_metrics(environ)
        return await self.front.run_hook(self, environ, cluster_of(path, body))

    def environ(self, request: h11.Request, body: bytes) -> dict[str, Any]:
        """The WSGI environ of a request read whole (PEP 3333)."""
        assert self.transport is not None
        path, query = split_target(request.target)
        sockname = self.transport.get_extra_info("sockname") or ("", 0)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": request.method.decode("latin-1"),
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "RAW_URI": request.target.decode("latin-1"),
            "SERVER_NAME": str(sockname[0]),
            "SERVER_PORT": str(sockname[1]),
            "SERVER_PROTOCOL": "HTTP/" + request.http_version.decode("latin-1"),
            "SERVER_SOFTWARE": "hpcbridge",
            "REMOTE_ADDR": self.peer[0],
            "REMOTE_PORT": str(self.peer[1]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if self.listener.tls else "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.input_terminated": True,
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": self.front.multiprocess,
            "wsgi.run_once": False,
        }
        if self.peer_certificate:
            environ[auth.PEER_CERTIFICATE] = self.peer_certificate
        framed = False
        for name, value in request.headers:
            key = name.decode("latin-1")
            if key in ("content-length", "transfer-encoding"):
                framed = True  # the body is whole: CONTENT_LENGTH below says how long
                continue
            if "_" in key:  # X_Token would otherwise pass for X-Token
                continue
            text = value.decode("latin-1")
            if key == "content-type":
                environ["CONTENT_TYPE"] = text
                continue
            wsgi_key = "HTTP_" + key.upper().replace("-", "_")
            environ[wsgi_key] = f"{environ[wsgi_key]},{text}" if wsgi_key in environ else text
        if framed or body:
            environ["CONTENT_LENGTH"] = str(len(body))
        return environ

    async def send(self, h: h11.Connection, request: h11.Request, environ: dict[str, Any],
                   answer: Answer, seconds: float) -> bool:
        """Write the answer; whether the connection may carry another request."""
        if self.lost:
            return False
        try:
            data = self.framed(h, request, answer, close=answer.close or self.front.stopping)
        except h11.LocalProtocolError as error:
            self.front.log.error("cannot answer ip=%s: %s", self.peer[0], error)
            return False
        self.write(data)
        self.log_access(request, environ, answer, seconds)
        if not self.writable.is_set():
            loop = asyncio.get_running_loop()
            try:
                await self.wait(self.writable, loop.time() + self.front.header_timeout)
            except Timeout:  # the client reads no answer: it gets no other
                return False
        return not self.lost

    async def refuse(self, h: h11.Connection, request: h11.Request | None,
                     answer: Answer) -> None:
        """Answer an error before the request (``request``'s head, if it was read) was read
        whole, then close the connection."""
        if self.lost:
            return
        try:
            data = self.framed(h, request, answer, close=True)
        except h11.LocalProtocolError:
            return  # an answer was under way already
        self.write(data)
        assert self.transport is not None
        if self.transport.can_write_eof():
            try:
                self.transport.write_eof()
            except OSError:  # the client is gone
                return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LINGER
        try:
            while not self.eof and not self.lost:
                await self.receive(deadline)
        except Timeout:
            pass

    def framed(self, h: h11.Connection, request: h11.Request | None, answer: Answer, *,
               close: bool) -> bytes:
        """The answer as ``h`` sends it, with its length and date (and ``connection: close``);
        to HEAD without its body, with the length the app declared. Raises
        h11.LocalProtocolError when ``h`` cannot send it now."""
        head = request is not None and request.method == b"HEAD"
        length = answer.length if head and answer.length is not None else len(answer.body)
        headers = [*answer.headers, (b"content-length", str(length).encode())]
        if not any(name == b"date" for name, _ in answer.headers):
            headers.append((b"date", self.front.date()))
        if close:
            headers.append((b"connection", b"close"))
        data = h.send(h11.Response(status_code=answer.status, headers=headers,
                                   reason=answer.reason or phrase(answer.status))) or b""
        if answer.body and not head:
            data += h.send(h11.Data(data=answer.body)) or b""
        return data + (h.send(h11.EndOfMessage()) or b"")

    def write(self, data: bytes | None) -> None:
        if data and not self.lost and self.transport is not None:
            self.transport.write(data)

    def log_access(self, request: h11.Request, environ: dict[str, Any], answer: Answer,
                   seconds: float) -> None:
        if not self.front.access_log:
            return
        headers = [(k.decode("latin-1").upper(), v.decode("latin-1"))
                   for k, v in request.headers]
        response = types.SimpleNamespace(
            status=f"{answer.status} {(answer.reason or phrase(answer.status)).decode()}",
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in answer.headers],
            sent=len(answer.body))
        self.front.log.access(response, types.SimpleNamespace(headers=headers), environ,
                              datetime.timedelta(seconds=seconds))

    # -- reading with deadlines -------------------------------------------------------------

    async def receive(self, deadline: float) -> bytes:
        """What the client sent since the last call (b"" at its end), by ``deadline``."""
        await self.receivable(deadline)
        data = bytes(self.inbox)
        self.inbox.clear()
        if self.reading_paused and self.transport is not None and not self.lost:
            self.reading_paused = False
            self.transport.resume_reading()
        return data

    async def receivable(self, deadline: float) -> None:
        while not self.inbox and not self.eof and not self.lost:
            self.readable.clear()
            await self.wait(self.readable, deadline)

    @staticmethod
    async def wait(event: asyncio.Event, deadline: float) -> None:
        try:
            async with asyncio.timeout_at(deadline):
                await event.wait()
        except TimeoutError:
            raise Timeout from None


def content_length(request: h11.Request) -> int | None:
    """The body length a request declares (h11 checked the header); None when chunked."""
    for name, value in request.headers:
        if name == b"content-length":
            return int(value)
    return None if any(name == b"transfer-encoding" for name, _ in request.headers) else 0


def phrase(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def too_large(limit: int) -> Answer:
    return json_answer(413, "Request Entity Too Large",
                       f"the request body exceeds {limit} bytes (HPCBRIDGE_MAX_BODY)",
                       close=True)


def split_target(target: bytes) -> tuple[str, str]:
    """PATH_INFO (percent-decoded, as latin-1 text) and QUERY_STRING of a request target."""
    if not target.startswith(b"/"):  # absolute form (http://host/path) or *
        parts = urllib.parse.urlsplit(target)
        target = (parts.path or b"/") + (b"?" + parts.query if parts.query else b"")
    path, _, query = target.partition(b"?")
    return urllib.parse.unquote_to_bytes(path).decode("latin-1"), query.decode("latin-1")


def connections(front: Front, listener: Listener) -> Callable[[], Connection]:
    return lambda: Connection(front, listener)


class ProbeLoop:
    """The probes' port on an event loop of its own, in a thread of its own: TLS handshakes,
    which take the hook loop a few milliseconds each, never delay /healthz (OpenSSL releases
    the GIL while it computes)."""

    def __init__(self, front: Front, socks: list[socket.socket], backlog: int) -> None:
        self.front, self.socks, self.backlog = front, socks, backlog
        self.loop = asyncio.new_event_loop()
        self.servers: list[asyncio.Server] = []
        self.thread = threading.Thread(target=self._run, name="probes", daemon=True)

    def start(self) -> None:
        started = concurrent.futures.Future[None]()
        self.loop.call_soon(lambda: self.loop.create_task(self._listen(started)))
        self.thread.start()
        started.result()  # a port that cannot be served stops the worker now

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    async def _listen(self, started: concurrent.futures.Future[None]) -> None:
        try:
            listener = Listener(None, True)
            for sock in self.socks:
                self.servers.append(await self.loop.create_server(
                    connections(self.front, listener), sock=sock, backlog=self.backlog))
        except BaseException as error:
            started.set_exception(error)
            raise
        started.set_result(None)

    def stop(self, grace: float) -> None:
        async def stopping() -> None:
            for server in self.servers:
                server.close()
            await self.front.stop(grace)

        asyncio.run_coroutine_threadsafe(stopping(), self.loop).result(timeout=grace + 10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class Worker(GunicornWorker):  # type: ignore[misc]
    """A gunicorn worker process that serves the hooks through the front above: the hook port
    on the main thread's event loop, the probes' port on a loop of its own."""

    def init_process(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.stopped = asyncio.Event()
        self.quick = False
        super().init_process()

    def init_signals(self) -> None:
        for number in self.SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGWINCH, signal.SIG_IGN)
        self.loop.add_signal_handler(signal.SIGTERM, self._stop, False)
        self.loop.add_signal_handler(signal.SIGQUIT, self._stop, True)
        self.loop.add_signal_handler(signal.SIGINT, self._stop, True)
        self.loop.add_signal_handler(signal.SIGUSR1, self.log.reopen_files)
        self.loop.add_signal_handler(signal.SIGABRT, self._abort)

    def _stop(self, quick: bool) -> None:
        self.alive = False
        self.quick = self.quick or quick
        if quick:
            self.cfg.worker_int(self)
        self.stopped.set()

    def _abort(self) -> None:
        self.alive = False
        self.cfg.worker_abort(self)
        sys.exit(1)

    def run(self) -> None:
        try:
            self.loop.run_until_complete(self._serve())
        finally:
            self.loop.close()

    def _front(self, settings: Settings) -> Front:
        return Front(self.wsgi, settings, keepalive=self.cfg.keepalive,
                     max_connections=self.cfg.worker_connections,
                     multiprocess=self.cfg.workers > 1, log=self.log)

    async def _serve(self) -> None:
        cfg = self.cfg
        settings = Settings.from_env(os.environ)
        front = self._front(settings)
        tls = None
        if cfg.is_ssl:
            tls = ServerTLS(cfg.certfile, cfg.keyfile, cfg.ca_certs, cfg.cert_reqs,
                            cfg.ciphers, self.log)
            tls.context()  # unusable files stop the worker now, not at the first call
        probes_port = probe_port(os.environ)
        hook_socks: list[socket.socket] = []
        probe_socks: list[socket.socket] = []
        for sock in self.sockets:
            name = sock.sock.getsockname()
            port = name[1] if isinstance(name, tuple) else None
            (probe_socks if port == probes_port else hook_socks).append(sock.sock)
        if cfg.cert_reqs == ssl.CERT_REQUIRED and not probe_socks:
            self.log.warning("client certificates are required and HPCBRIDGE_METRICS_PORT is "
                             "not set: /healthz answers only clients with a certificate")
        loop = asyncio.get_running_loop()
        listener = Listener(tls, False)
        servers = [await loop.create_server(connections(front, listener), sock=sock,
                                            backlog=cfg.backlog) for sock in hook_socks]
        probes = ProbeLoop(self._front(settings), probe_socks, cfg.backlog) \
            if probe_socks else None
        if probes is not None:
            probes.start()
        while self.alive:
            self.notify()  # from the hook loop: the master restarts a worker whose loop stalls
            if self.ppid != os.getppid():
                self.log.info("Parent changed, shutting down: %s", self)
                break
            try:
                async with asyncio.timeout(1.0):
                    await self.stopped.wait()
            except TimeoutError:
                pass
        for server in servers:
            server.close()
        grace = 0.0 if self.quick else cfg.graceful_timeout
        await front.stop(grace)
        if probes is not None:
            await asyncio.to_thread(probes.stop, min(grace, 1.0))
