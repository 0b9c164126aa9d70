"""The driver's endpoint for long-running tasks: only a task with the job's secret gets
in, and frames are bounded before they are read."""

from __future__ import annotations

import socket
import struct

import pytest

from sparkpoint.runtime.spark.epoch_link import (
    DATA,
    Hello,
    LinkClosed,
    LinkSocket,
    new_secret,
    read_hello,
    send_hello,
)


def _pair() -> tuple[LinkSocket, LinkSocket]:
    a, b = socket.socketpair()
    return LinkSocket(a), LinkSocket(b)


def test_hello_with_the_secret_is_read() -> None:
    secret = new_secret()
    task, driver = _pair()
    send_hello(task, secret, Hello(3, 1, 0, "7", "10.0.0.5", 1234))
    assert read_hello(driver, secret) == Hello(3, 1, 0, "7", "10.0.0.5", 1234)


def test_hello_without_the_secret_is_refused() -> None:
    task, driver = _pair()
    send_hello(task, new_secret(), Hello(1, 0, 0, "driver", "h", 1))
    with pytest.raises(LinkClosed, match="without the job's link secret"):
        read_hello(driver, new_secret())


def test_first_frame_must_be_a_small_hello() -> None:
    secret = new_secret()
    task, driver = _pair()
    task.send(DATA, 1, 0, 0, 0, secret + b"x" * 10)
    with pytest.raises(LinkClosed, match="without the job's link secret"):
        read_hello(driver, secret)
    task, driver = _pair()
    # a header announcing 1 MiB before any secret: refused without reading the body
    task.sock.sendall(struct.pack("!BqiiiQ", 1, 0, 0, 0, 0, 1 << 20))
    with pytest.raises(LinkClosed, match="exceeds the limit of 4096"):
        read_hello(driver, secret)


def test_frames_round_trip_and_unknown_kinds_close() -> None:
    a, b = _pair()
    a.send(DATA, 42, 1, 2, 3, b"rows")
    frame = b.recv()
    assert (frame.kind, frame.run, frame.a, frame.b, frame.c, frame.payload) == (
        DATA,
        42,
        1,
        2,
        3,
        b"rows",
    )
    a.sock.sendall(struct.pack("!BqiiiQ", 99, 0, 0, 0, 0, 0))
    with pytest.raises(LinkClosed, match="unknown frame kind 99"):
        b.recv()
    a.close()
    with pytest.raises(LinkClosed, match="closed"):
        b.recv()
