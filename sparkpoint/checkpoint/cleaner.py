"""``CheckpointsCleaner``: discards subsumed checkpoints and aborted ones off the hot path.

Cleanups run on a small thread pool. In parallel mode (Flink 1.19's
``execution.checkpointing.cleaner.parallel-mode``) the state objects of one checkpoint are
discarded concurrently, and its directory is removed once they all are. The number of
checkpoints still being cleaned is counted: the coordinator triggers no new checkpoint while
it exceeds the maximum concurrency.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from sparkpoint.checkpoint.handles import (
    ChangelogStateBackendHandle,
    IncrementalRemoteKeyedStateHandle,
    PlaceholderStreamStateHandle,
    StateObject,
    discard_quietly,
    stream_handles,
)
from sparkpoint.checkpoint.shared_registry import SharedStateRegistry
from sparkpoint.checkpoint.storage import CheckpointStorageLocation

__all__ = ["CheckpointsCleaner", "Discardable"]

_LOG = logging.getLogger(__name__)


class Discardable(Protocol):
    """A completed checkpoint as the cleaner sees it."""

    @property
    def checkpoint_id(self) -> int: ...

    def should_be_discarded_on_subsume(self) -> bool: ...

    def discard_parts(self) -> tuple[list[StateObject], Callable[[], None]]: ...


class CheckpointsCleaner:
    """Discards checkpoints asynchronously and counts how many cleanups are in flight."""

    def __init__(self, parallel_mode: bool = True, max_workers: int = 4) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self._parallel = parallel_mode
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="checkpoint-cleaner")
        self._lock = threading.Condition()
        self._in_flight = 0
        self._subsumed: list[Discardable] = []
        self._closed = False

    @property
    def parallel_mode(self) -> bool:
        """Whether the state objects of one checkpoint are discarded concurrently."""
        return self._parallel

    def get_number_of_checkpoints_to_clean(self) -> int:
        """Checkpoints whose cleanup has been started but not finished."""
        with self._lock:
            return self._in_flight

    # ---- completed checkpoints --------------------------------------------------------

    def add_subsumed_checkpoint(self, checkpoint: Discardable) -> None:
        """Remember a subsumed checkpoint; ``clean_subsumed_checkpoints`` discards it."""
        with self._lock:
            self._subsumed.append(checkpoint)

    def clean_subsumed_checkpoints(
        self,
        up_to: int | None = None,
        still_in_use: Iterable[int] = (),
        post_cleanup: Callable[[], None] | None = None,
    ) -> int:
        """Discard remembered subsumed checkpoints with id below ``up_to`` (all if ``None``)
        that are not ``still_in_use``; returns how many cleanups were started."""
        in_use = set(still_in_use)
        with self._lock:
            ready = [
                c
                for c in self._subsumed
                if (up_to is None or c.checkpoint_id < up_to) and c.checkpoint_id not in in_use
            ]
            self._subsumed = [c for c in self._subsumed if c not in ready]
        for checkpoint in ready:
            if checkpoint.should_be_discarded_on_subsume():
                self.clean_checkpoint(checkpoint, post_cleanup)
            elif post_cleanup is not None:
                post_cleanup()
        return len(ready)

    def clean_checkpoint(
        self, checkpoint: Discardable, post_cleanup: Callable[[], None] | None = None
    ) -> Future[None]:
        """Discard ``checkpoint`` (its state, then its directory) in the background."""
        states, finish = checkpoint.discard_parts()
        return self._clean(states, finish, post_cleanup, f"checkpoint {checkpoint.checkpoint_id}")

    # ---- aborted pending checkpoints ---------------------------------------------------

    def clean_aborted_checkpoint(
        self,
        checkpoint_id: int,
        location: CheckpointStorageLocation | None,
        states: Iterable[StateObject],
        post_cleanup: Callable[[], None] | None = None,
        shared_state_registry: SharedStateRegistry | None = None,
    ) -> Future[None]:
        """Discard what tasks acknowledged for an aborted checkpoint, then its location.

        Shared files the checkpoint uploaded itself (not placeholders) are discarded too
        when ``shared_state_registry`` does not know them: nobody else can reference them,
        since only files of confirmed checkpoints are reused. Registered shared files are
        left to the registry.
        """
        to_discard = list(states)
        if shared_state_registry is not None:
            to_discard.extend(_unregistered_shared_uploads(to_discard, shared_state_registry))

        def finish() -> None:
            if location is not None:
                location.dispose_on_failure()

        what = f"aborted checkpoint {checkpoint_id}"
        return self._clean(to_discard, finish, post_cleanup, what)

    # ---- machinery ---------------------------------------------------------------------

    def _clean(
        self,
        states: list[StateObject],
        finish: Callable[[], None],
        post_cleanup: Callable[[], None] | None,
        what: str,
    ) -> Future[None]:
        with self._lock:
            if self._closed:
                raise RuntimeError("The checkpoints cleaner is closed")
            self._in_flight += 1
        done: Future[None] = Future()

        def final_step() -> None:
            try:
                finish()
            except Exception:  # cleanup must go on
                _LOG.warning("Could not dispose the location of %s", what, exc_info=True)
            finally:
                try:
                    if post_cleanup is not None:
                        post_cleanup()
                finally:
                    with self._lock:
                        self._in_flight -= 1
                        self._lock.notify_all()
                    done.set_result(None)

        if not self._parallel or len(states) <= 1:

            def sequential() -> None:
                discard_quietly(states)
                final_step()

            self._pool.submit(sequential)
            return done

        remaining = [len(states)]
        counter_lock = threading.Lock()

        def one_done(_: Future[None]) -> None:
            with counter_lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self._pool.submit(final_step)

        for state in states:
            self._pool.submit(discard_quietly, [state]).add_done_callback(one_done)
        return done

    def wait_until_idle(self, timeout: float | None = 30.0) -> bool:
        """Block until no cleanup is in flight; whether that happened within ``timeout``."""
        with self._lock:
            return self._lock.wait_for(lambda: self._in_flight == 0, timeout)

    def close(self, wait: bool = True) -> None:
        """Stop accepting cleanups; with ``wait``, finish those in flight first."""
        if wait:
            self.wait_until_idle(None)
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait)

    def __enter__(self) -> CheckpointsCleaner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unregistered_shared_uploads(
    states: list[StateObject], registry: SharedStateRegistry
) -> list[StateObject]:
    """Shared files uploaded for the checkpoints of ``states`` that no checkpoint registered:
    new files of incremental handles and a changelog handle's new materialization (its
    changelog entries belong to the job, which deletes those no checkpoint took)."""
    found: list[StateObject] = []
    for state in states:
        if isinstance(state, IncrementalRemoteKeyedStateHandle):
            candidates = [item.handle for item in state.shared_state]
        elif isinstance(state, ChangelogStateBackendHandle) and state.materialized_here:
            candidates = [h for m in state.materialized for h in stream_handles(m)]
        else:
            continue
        for handle in candidates:
            if isinstance(handle, PlaceholderStreamStateHandle):
                continue
            if not registry.check_in_use(handle):
                found.append(handle)
    return found
