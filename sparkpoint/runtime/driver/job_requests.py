"""The requests a job client queues for its job master (savepoint, stop-with-savepoint,
cancel): taken one per epoch boundary, each answered through its future."""

from __future__ import annotations

import collections
import enum
import threading
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
        self._items: collections.deque[ClientRequest] = collections.deque()
        self._arrived = threading.Condition()

    def put(self, kind: str, target: str | None = None, drain: bool = False) -> Future[Any]:
        """Queue a request; its future is answered when the job master handled it."""
        fut: Future[Any] = Future()
        self.requeue(ClientRequest(RequestKind(kind), target, drain, fut))
        return fut

    def requeue(self, request: ClientRequest) -> None:
        """Queue ``request`` again (to retry it after a restore)."""
        with self._arrived:
            self._items.append(request)
            self._arrived.notify_all()

    def take(self) -> ClientRequest | None:
        """The oldest request, if any."""
        with self._arrived:
            return self._items.popleft() if self._items else None

    def take_cancel(self) -> ClientRequest | None:
        """The queued cancel request, if any (the others stay queued): a job that cannot
        restore is still cancelled."""
        with self._arrived:
            for request in self._items:
                if request.kind == RequestKind.CANCEL:
                    self._items.remove(request)
                    return request
        return None

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a request (the job master between epochs); whether
        one is queued."""
        with self._arrived:
            return self._arrived.wait_for(lambda: bool(self._items), timeout_s)

    def fail_all(self, job_id: str, status: str) -> None:
        """Answer every queued request with an error: the job is ``status`` and will not
        handle them."""
        while (req := self.take()) is not None:
            if not req.future.done():
                req.future.set_exception(
                    SparkpointError(f"Job {job_id} is {status}; {req.kind} not done")
                )
