"""A bounded HTTP server for the driver: a cap on open connections and a time limit on each,
so that clients which connect and send nothing cannot take the server's threads or the
process's file handles (``ThreadingHTTPServer`` gives every connection a thread that waits
for its request without a limit: a few hundred idle connections stopped the dashboard).

One thread accepts connections and watches them with a selector. A connection goes to one
of ``workers`` threads only once it has bytes to read, and then has ``request_timeout_s``
for its whole request and answer (its socket is shut when the time is up). A connection
that sends nothing is closed after ``idle_timeout_s``. When ``max_connections`` are open, a
new one closes the connection idle the longest (or, when none is idle, gets 503 and is
closed). One request per connection (HTTP/1.0, ``Connection: close``).

Requests go through the Host check (421 for another site's name, see ``host_check``), then
to the routes in order: the first that answers (not None) wins, none gives 404.
"""

from __future__ import annotations

import json
import logging
import selectors
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any

from sparkpoint.runtime.serving.host_check import HostCheck

__all__ = ["BoundedServer", "Request", "Response", "Route", "ServerLimits"]

_LOG = logging.getLogger("sparkpoint.job")
_ACCEPTS_PER_TICK = 256
_BACKLOG = 1024  # connections the kernel queues before the accepting thread takes them
_TICK_S = 0.2
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass(frozen=True)
class ServerLimits:
    """How much one server takes: open connections, time per connection, threads, body."""

    max_connections: int = 128
    idle_timeout_s: float = 30.0  # a connection that sends nothing is closed after this
    request_timeout_s: float = 10.0  # the whole request and its answer, from its first byte
    workers: int = 8  # requests answered at once
    max_body_bytes: int = 64 * 1024


@dataclass(frozen=True)
class Request:
    """One request as the routes see it (``HEAD`` is given as ``HEAD``; its body is dropped)."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Message
    body: bytes
    client: str


@dataclass(frozen=True)
class Response:
    """An answer: status, body, its type and any further headers."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, value: Any, headers: Mapping[str, str] | None = None) -> Response:
        """``value`` as a JSON answer."""
        body = json.dumps(value, indent=1).encode("utf-8")
        return cls(status, body, "application/json", dict(headers or {}))


Route = Callable[[Request], "Response | None"]


@dataclass
class _Connection:
    address: str
    opened: float
    deadline: float | None = None  # set while a worker answers it
    shut: bool = False


class _Handler(BaseHTTPRequestHandler):
    """Parses one request and hands it to the server's routes."""

    server: Any  # the BoundedServer (not a socketserver)

    def _dispatch(self) -> None:
        owner: BoundedServer = self.server
        owner.answer(self)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _dispatch

    def log_message(self, format: str, *args: Any) -> None:
        _LOG.debug("%s: " + format, self.server.name, *args)


class BoundedServer:
    """Serves ``routes`` on ``host``:``port`` (0: any free port) until ``stop``.

    ``name`` names it in log lines; ``OSError`` when it cannot bind.
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Sequence[Route],
        name: str,
        limits: ServerLimits | None = None,
    ) -> None:
        self.name = name
        self.limits = limits or ServerLimits()
        self._routes = tuple(routes)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server(
            (host.strip("[]"), port), family=family, backlog=_BACKLOG
        )
        self._listener.setblocking(False)
        self.host = host
        self.port = int(self._listener.getsockname()[1])
        self.host_check = HostCheck(host, self.port)
        self._lock = threading.Lock()
        self._open: dict[socket.socket, _Connection] = {}
        self._closing = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._pool = ThreadPoolExecutor(self.limits.workers, thread_name_prefix=f"{name}-worker")
        self._thread = threading.Thread(
            target=self._loop, name=f"sparkpoint-{name}-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://host:port/`` of this server."""
        host = str(self._listener.getsockname()[0])
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/"

    def open_connections(self) -> int:
        """How many connections are open now (idle or being answered)."""
        with self._lock:
            return len(self._open)

    # -- the accepting thread -------------------------------------------------------------
    def _loop(self) -> None:
        while not self._closing.is_set():
            for key, _events in self._selector.select(timeout=_TICK_S):
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._ready(key.fileobj)  # type: ignore[arg-type]
            self._expire(time.monotonic())

    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_TICK):
            try:
                conn, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # out of file handles: make room, try again next tick
                _LOG.warning("%s: cannot accept a connection: %s", self.name, exc)
                self._evict_idle()
                return
            conn.setblocking(False)
            if self.open_connections() >= self.limits.max_connections and not self._evict_idle():
                _LOG.info(
                    "%s: %d connections busy; refused %s",
                    self.name,
                    self.open_connections(),
                    address[0],
                )
                try:
                    conn.send(_BUSY)
                except OSError:
                    pass
                conn.close()
                continue
            with self._lock:
                self._open[conn] = _Connection(str(address[0]), time.monotonic())
            self._selector.register(conn, selectors.EVENT_READ)

    def _evict_idle(self) -> bool:
        """Close the connection idle the longest; whether there was one."""
        with self._lock:
            idle = [(c.opened, s) for s, c in self._open.items() if c.deadline is None]
        if not idle:
            return False
        _opened, sock = min(idle, key=lambda item: item[0])
        self._selector.unregister(sock)
        self._forget(sock)
        return True

    def _ready(self, sock: socket.socket) -> None:
        """``sock`` has bytes (or its end): a worker answers it."""
        self._selector.unregister(sock)
        with self._lock:
            entry = self._open.get(sock)
            if entry is None:
                return
            entry.deadline = float("inf")  # queued for a worker: not idle any more
        self._pool.submit(self._serve, sock, entry.address)

    def _expire(self, now: float) -> None:
        """Close idle connections past their time; shut those answered past theirs."""
        idle_limit = self.limits.idle_timeout_s
        with self._lock:
            entries = list(self._open.items())
        for sock, entry in entries:
            if entry.deadline is None and now - entry.opened > idle_limit:
                self._selector.unregister(sock)
                self._forget(sock)
            elif entry.deadline is not None and now > entry.deadline:
                with self._lock:
                    if sock in self._open and not entry.shut:
                        entry.shut = True
                        _LOG.info(
                            "%s: %s took over %.0f s for its request; closed",
                            self.name,
                            entry.address,
                            self.limits.request_timeout_s,
                        )
                        try:
                            sock.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.pop(sock, None)
        sock.close()

    # -- the workers ------------------------------------------------------------------------
    def _serve(self, sock: socket.socket, address: str) -> None:
        with self._lock:
            entry = self._open.get(sock)
            if entry is None:
                return
            entry.deadline = time.monotonic() + self.limits.request_timeout_s
        try:
            sock.setblocking(True)
            sock.settimeout(self.limits.request_timeout_s)
            _Handler(sock, (address, 0), self)  # type: ignore[arg-type]
        except (ConnectionError, TimeoutError) as exc:
            _LOG.info(
                "%s: client %s went away before its answer was sent (%s)",
                self.name,
                address,
                type(exc).__name__,
            )
        except Exception as exc:
            _LOG.warning("%s: error answering %s", self.name, address, exc_info=exc)
        finally:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._forget(sock)

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        """Answer the request ``handler`` has parsed (called on a worker thread)."""
        response = self._response(handler)
        handler.send_response(response.status)
        handler.send_header("Content-Type", response.content_type)
        handler.send_header("Content-Length", str(len(response.body)))
        handler.send_header("Cache-Control", "no-store")
        handler.send_header("X-Content-Type-Options", "nosniff")
        for name, value in response.headers.items():
            handler.send_header(name, value)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        if handler.command != "HEAD":
            handler.wfile.write(response.body)

    def _response(self, handler: BaseHTTPRequestHandler) -> Response:
        host = handler.headers.get("Host")
        if not self.host_check.allows(host):
            _LOG.info(
                "%s: refused a request from %s for Host %r (not this server's address)",
                self.name,
                handler.client_address[0],
                host,
            )
            return Response(421)
        body = _read_body(handler, self.limits.max_body_bytes)
        if isinstance(body, Response):
            return body
        split = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        request = Request(
            handler.command, split.path, query, handler.headers, body, handler.client_address[0]
        )
        for route in self._routes:
            response = route(request)
            if response is not None:
                return response
        return Response(404, b"Not found\n")

    def stop(self) -> None:
        """Stop serving: the port is released and every open connection closed."""
        self._closing.set()
        self._thread.join()
        self._selector.close()
        self._listener.close()
        with self._lock:
            socks = list(self._open)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._pool.shutdown(wait=True)
        for sock in socks:
            self._forget(sock)


def _read_body(handler: BaseHTTPRequestHandler, limit: int) -> bytes | Response:
    """The request's body (by ``Content-Length``; none: empty), or the error answer."""
    if handler.headers.get("Transfer-Encoding"):
        return Response(411, b"Content-Length required\n")
    text = handler.headers.get("Content-Length")
    if text is None:
        return b""
    if not text.strip().isdigit():
        return Response(400, b"Bad Content-Length\n")
    length = int(text)
    if length > limit:
        return Response(413, f"Body over {limit} bytes\n".encode())
    return handler.rfile.read(length)
