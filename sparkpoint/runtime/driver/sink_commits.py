"""The driver's bookkeeping of sink output: staged per epoch, committed when a checkpoint
covering the epoch completes (or at once without checkpointing), aborted on rollback.

After each commit and restore, a sink that can find what it staged on its own
(``abort_lingering``, the Kafka sink's open transactions) aborts everything staged that is
neither committed nor pending here: what failed runs and killed tasks left behind."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sparkpoint.runtime.protocol import SinkOutput

__all__ = ["SinkCommits"]


class SinkCommits:
    """Committables of transactional sinks per epoch; the one place that commits them."""

    def __init__(
        self,
        sinks: Mapping[str, Any],
        committed: Callable[[int], None] | None = None,
        covered: Callable[[int], None] | None = None,
    ) -> None:
        self.sinks = dict(sinks)
        self._pending: list[tuple[int, str, list[Any]]] = []
        # Told the newest epoch whose staged output each commit published.
        self._committed = committed
        # Told, after each commit, the epoch it covered (its output staged or not).
        self._covered = covered

    @property
    def transactional(self) -> bool:
        """Whether a sink publishes only when a commit covers the epoch (else every sink
        publishes at the epoch's end)."""
        return any(getattr(s, "transactional", True) for s in self.sinks.values())

    def absorb(self, epoch: int, outputs: Iterable[SinkOutput]) -> None:
        """Take a finished epoch's sink output: transactional output waits for its commit,
        collected records (print, collect) are emitted now."""
        for out in outputs:
            if out.transactional:
                self._pending.append((epoch, out.operator_id, list(out.committables)))
            else:
                self.sinks[out.operator_id].commit(list(out.committables))

    def pending_up_to(self, epoch: int) -> list[tuple[str, list[Any]]]:
        """``(sink, committables)`` staged in epochs up to ``epoch`` (for ``_metadata``)."""
        return [(op, c) for e, op, c in self._pending if e <= epoch]

    def commit_up_to(self, epoch: int) -> None:
        """Commit everything staged in epochs up to ``epoch``."""
        due = self.pending_up_to(epoch)
        # Forgotten before the commit: if it fails, the restore redoes it from the
        # checkpoint's master state, and the failover must not abort it.
        newest = max((e for e, _op, _c in self._pending if e <= epoch), default=None)
        self._pending = [p for p in self._pending if p[0] > epoch]
        self._apply(due, commit=True)
        if newest is not None and self._committed is not None:
            self._committed(newest)
        if self._covered is not None:
            self._covered(epoch)
        self._abort_lingering()

    def abort_all(self) -> None:
        """Abort everything staged and not committed (rollback, cancel, failure); what is
        not aborted yet stays pending, so a failover that fails here tries again."""
        due = [(op, c) for _e, op, c in self._pending]
        self._apply(due, commit=False)
        self._pending = []
        # No sweep here: a completed checkpoint's transactions whose commit failed are open
        # too, and the restore that follows must commit them (it sweeps after that).

    def discard(self, outputs: Iterable[SinkOutput]) -> None:
        """Abort the staged output of a run whose results are not used."""
        self._apply(
            [(o.operator_id, list(o.committables)) for o in outputs if o.transactional],
            commit=False,
        )

    def recommit(self, pending: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Commit again what a restored checkpoint recorded as pending (idempotent), then
        abort whatever else the sinks staged (Flink: commit the recovered committables,
        abort every other transaction of the job)."""
        self._apply(
            [
                (op, [tuple(c) if isinstance(c, list) else c for c in committables])
                for op, committables in pending
                if op in self.sinks
            ],
            commit=True,
        )
        self._abort_lingering()

    def _abort_lingering(self) -> None:
        for op, sink in self.sinks.items():
            abort_lingering = getattr(sink, "abort_lingering", None)
            if abort_lingering is not None:
                abort_lingering([c for _e, o, cs in self._pending if o == op for c in cs])

    def cleanup_job(self, job_id: str) -> None:
        """Let every sink remove what the job left (e.g. in-progress directories)."""
        for sink in self.sinks.values():
            cleanup = getattr(sink, "cleanup_job", None)
            if cleanup is not None:
                cleanup(job_id)

    def _apply(self, items: Sequence[tuple[str, list[Any]]], *, commit: bool) -> None:
        by_sink: dict[str, list[Any]] = {}
        for op, committables in items:
            by_sink.setdefault(op, []).extend(committables)
        for op, committables in by_sink.items():
            sink = self.sinks[op]
            if commit:
                sink.commit(committables)
            else:
                sink.abort(committables)
