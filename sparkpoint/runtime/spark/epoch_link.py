"""The connection between the driver and the long-running tasks of a job
(``sparkpoint.epoch.mode=long-running``): length-prefixed frames over TCP.

A task connects to the driver and proves it belongs to the job with the job's link secret
(shipped in the task's closure, as the task itself is); the driver reads nothing else from
a connection before that. Frames: a fixed header (kind, run, three integers, payload
length) and the payload. The driver sends orders (``ORDER``: a run's spec and the groups
the task runs) and relays rows between tasks (``DATA``); a task sends rows for other tasks
(``DATA``), the end of each group it ran (``REPORTS``, with a final stage's reports) and
the text of an error (``FAILED``). Payload sizes are bounded before anything is read.
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
import struct
import threading
from dataclasses import dataclass

from sparkpoint.errors import SparkpointError

__all__ = [
    "DATA",
    "FAILED",
    "HELLO",
    "ORDER",
    "REPORTS",
    "STOP",
    "Frame",
    "Hello",
    "LinkClosed",
    "LinkSocket",
    "decode_order",
    "encode_order",
    "new_secret",
    "read_hello",
    "send_hello",
]

HELLO, ORDER, DATA, REPORTS, FAILED, STOP = 1, 2, 3, 4, 5, 6
_KINDS = frozenset((HELLO, ORDER, DATA, REPORTS, FAILED, STOP))
_HEADER = struct.Struct("!BqiiiQ")
_LENGTH = struct.Struct("!Q")
_SECRET_BYTES = 32
_MAX_HELLO = 4096
MAX_FRAME = 1 << 31  # 2 GiB: one run's rows for one task group


class LinkClosed(SparkpointError):
    """The other end closed the connection, or sent what the protocol does not allow."""


@dataclass(frozen=True)
class Frame:
    kind: int
    run: int
    a: int
    b: int
    c: int
    payload: bytes


@dataclass(frozen=True)
class Hello:
    """What a task tells the driver when it connects."""

    launch: int
    slot: int
    attempt: int
    executor_id: str
    host: str
    pid: int


def new_secret() -> bytes:
    """A job's link secret."""
    return secrets.token_bytes(_SECRET_BYTES)


def _read_exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise LinkClosed("connection closed")
        got += n
    return bytes(buf)


class LinkSocket:
    """A connected socket that sends and receives frames (sends from any thread)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, kind: int, run: int, a: int, b: int, c: int, payload: bytes = b"") -> None:
        header = _HEADER.pack(kind, run, a, b, c, len(payload))
        try:
            with self._send_lock:
                self.sock.sendall(header)
                if payload:
                    self.sock.sendall(payload)
        except OSError as exc:
            raise LinkClosed(f"connection lost: {exc}") from None

    def forward(self, frame: Frame) -> None:
        self.send(frame.kind, frame.run, frame.a, frame.b, frame.c, frame.payload)

    def recv(self, max_payload: int = MAX_FRAME) -> Frame:
        try:
            kind, run, a, b, c, size = _HEADER.unpack(_read_exact(self.sock, _HEADER.size))
            if kind not in _KINDS:
                raise LinkClosed(f"unknown frame kind {kind}")
            if size > max_payload:
                raise LinkClosed(f"frame of {size} bytes exceeds the limit of {max_payload}")
            payload = _read_exact(self.sock, size) if size else b""
        except OSError as exc:
            raise LinkClosed(f"connection lost: {exc}") from None
        return Frame(kind, run, a, b, c, payload)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def send_hello(link: LinkSocket, secret: bytes, hello: Hello) -> None:
    """The task's first frame: the secret, then who it is."""
    body = json.dumps(
        {
            "launch": hello.launch,
            "slot": hello.slot,
            "attempt": hello.attempt,
            "executor_id": hello.executor_id,
            "host": hello.host,
            "pid": hello.pid,
        }
    ).encode()
    link.send(HELLO, 0, 0, 0, 0, secret + body)


def read_hello(link: LinkSocket, secret: bytes) -> Hello:
    """Read and check a task's first frame; ``LinkClosed`` if it is not a task of the job."""
    frame = link.recv(max_payload=_MAX_HELLO)
    if frame.kind != HELLO or not hmac.compare_digest(frame.payload[:_SECRET_BYTES], secret):
        raise LinkClosed("a connection without the job's link secret")
    try:
        body = json.loads(frame.payload[_SECRET_BYTES:])
        return Hello(
            int(body["launch"]),
            int(body["slot"]),
            int(body["attempt"]),
            str(body["executor_id"]),
            str(body["host"]),
            int(body["pid"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise LinkClosed(f"a malformed hello: {exc}") from None


def encode_order(spec: bytes, work: bytes) -> bytes:
    """An ORDER payload: the run's pickled spec (the same for every task), then the task's
    pickled work items."""
    return _LENGTH.pack(len(spec)) + spec + work


def decode_order(payload: bytes) -> tuple[memoryview, memoryview]:
    """The pickled spec and work items of an ORDER payload."""
    view = memoryview(payload)
    (size,) = _LENGTH.unpack_from(view)
    end = _LENGTH.size + size
    if end > len(view):
        raise LinkClosed("a truncated order")
    return view[_LENGTH.size : end], view[end:]
