"""The requests a job client queues for its job master (savepoint, stop-with-savepoint,
cancel): taken one per epoch boundary, each answered through its future."""

from __future__ import annotations

import enum
import queue
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from sparkpoint.errors import SparkpointError

__all__ = ["ClientRequest", "RequestKind", "RequestQueue"]


class RequestKind(enum.StrEnum):
    """What a request asks of the job."""

    SAVEPOINT = "savepoint"
    STOP = "stop"  # stop with a (synchronous) savepoint
    CANCEL = "cancel"


@dataclass
class ClientRequest:
    """One request: for a savepoint or a stop, its ``target`` directory (None: the
    configured one) and whether the stop drains (advances to the end of event time)."""

    kind: RequestKind
    target: str | None
    drain: bool
    future: Future[Any]


class RequestQueue:
    """The requests not yet taken (filled by client threads, taken by the job master)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[ClientRequest] = queue.Queue()

    def put(self, kind: str, target: str | None = None, drain: bool = False) -> Future[Any]:
        """Queue a request; its future is answered when the job master handled it."""
        fut: Future[Any] = Future()
        self._queue.put(ClientRequest(RequestKind(kind), target, drain, fut))
        return fut

    def requeue(self, request: ClientRequest) -> None:
        """Queue ``request`` again (to retry it after a restore)."""
        self._queue.put(request)

    def take(self) -> ClientRequest | None:
        """The oldest request, if any."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def fail_all(self, job_id: str, status: str) -> None:
        """Answer every queued request with an error: the job is ``status`` and will not
        handle them."""
        while (req := self.take()) is not None:
            if not req.future.done():
                req.future.set_exception(
                    SparkpointError(f"Job {job_id} is {status}; {req.kind} not done")
                )
