"""Fault injection, a manual clock and reference jobs for testing sparkpoint pipelines.

``Faults`` hooks into a job (``env.set_fault_injection(faults)``): callbacks run on the
driver before every run of an epoch (kill an executor, advance a clock, delete local
state) and inside tasks after every local state commit (fail there). ``FailureInjector``
fails at a chosen record; injected failures are counted in files (created with
``O_EXCL``), so they fire an exact number of times across Python workers, executors and
retries. ``ManualClock`` moves only when told; give it to
``StreamExecutionEnvironment.set_clock`` (or to a coordinator, restart strategy, keyed
backend or watermark generator) to drive time deterministically.
"""

from __future__ import annotations

import glob
import os
import signal
from collections.abc import Callable
from typing import Any

from sparkpoint.clock import FixedClock
from sparkpoint.datastream.functions import KeyedProcessFunction
from sparkpoint.runtime.driver.reports import EpochStart
from sparkpoint.runtime.operators.context import MAX_WATERMARK

__all__ = [
    "CountAndEcho",
    "EpochStart",
    "FailureInjector",
    "Faults",
    "InjectedFailure",
    "ManualClock",
    "executor_pids",
    "expected_keyed_count_output",
    "kill_executor",
    "local_state_dirs",
]

CommitCallback = Callable[[str, int, int], None]
UploadCallback = Callable[[str, int, int], None]


class _TaskFaults:
    """The part of ``Faults`` that is pickled into every task."""

    def __init__(
        self, after_commit: list[CommitCallback], before_upload: list[UploadCallback]
    ) -> None:
        self._after_commit = after_commit
        self._before_upload = before_upload

    def after_local_commit(self, operator_id: str, subtask: int, epoch: int) -> None:
        for callback in self._after_commit:
            callback(operator_id, subtask, epoch)

    def before_upload(self, operator_id: str, subtask: int, checkpoint_id: int) -> None:
        for callback in self._before_upload:
            callback(operator_id, subtask, checkpoint_id)


class Faults:
    """Fault injection for sparkpoint jobs; pass it to ``env.set_fault_injection``.

    ``on_epoch_start(callback)`` runs ``callback(EpochStart)`` on the driver before every
    Spark job of an epoch (a run), in the job master's thread. ``on_local_commit(callback)``
    runs ``callback(operator_id, subtask, epoch)`` inside a task right after a keyed
    subtask committed its state locally and before the task reports success (so raising
    there tests Spark's task retries); it is pickled into every task, so keep it small and
    count what it does with ``FailureInjector``. ``on_upload(callback)`` runs
    ``callback(operator_id, subtask, checkpoint_id)`` in the background thread of an
    asynchronous snapshot upload before it starts (delay it, fail it, kill its worker).
    """

    def __init__(self) -> None:
        self._epoch_start: list[Callable[[EpochStart], None]] = []
        self._after_commit: list[CommitCallback] = []
        self._before_upload: list[UploadCallback] = []
        self.epochs_seen: list[EpochStart] = []

    def on_epoch_start(self, callback: Callable[[EpochStart], None]) -> Faults:
        """Call ``callback`` on the driver before every run of every epoch."""
        self._epoch_start.append(callback)
        return self

    def on_local_commit(self, callback: CommitCallback) -> Faults:
        """Call ``callback(operator_id, subtask, epoch)`` in tasks after local commits."""
        self._after_commit.append(callback)
        return self

    def on_upload(self, callback: UploadCallback) -> Faults:
        """Call ``callback(operator_id, subtask, checkpoint_id)`` in the upload thread
        before each asynchronous snapshot upload (a background materialization's too: its
        id is the id of the checkpoint whose epoch started it)."""
        self._before_upload.append(callback)
        return self

    def fail_upload(self, injector: FailureInjector) -> Faults:
        """Fail (per ``injector``: raise or SIGKILL the Python worker) the asynchronous
        upload of checkpoint ``injector.at_record``, in its background thread."""

        def fail(_op: str, _sub: int, checkpoint_id: int) -> None:
            injector.maybe_fail(checkpoint_id)

        return self.on_upload(fail)

    def fail_after_local_commit(
        self, injector: FailureInjector, operator_id: str, subtask: int
    ) -> Faults:
        """Fail (per ``injector``: raise or SIGKILL the Python worker) right after
        ``operator_id``'s ``subtask`` committed the epoch ``injector.at_record``."""

        def fail(op: str, sub: int, epoch: int) -> None:
            if op == operator_id and sub == subtask:
                injector.maybe_fail(epoch)

        return self.on_local_commit(fail)

    # -- what the runtime calls ----------------------------------------------------------
    def before_epoch(self, event: EpochStart) -> None:
        """Runtime hook: an epoch run starts (records it, then runs the callbacks)."""
        self.epochs_seen.append(event)
        for callback in self._epoch_start:
            callback(event)

    def task_hooks(self) -> _TaskFaults | None:
        """Runtime hook: the picklable part for tasks (None when there is none)."""
        if not self._after_commit and not self._before_upload:
            return None
        return _TaskFaults(list(self._after_commit), list(self._before_upload))


def executor_pids(application_id: str) -> dict[str, int]:
    """Executor id -> pid of every executor JVM of ``application_id`` on this host (Linux:
    read from ``/proc``; the executors of standalone and local-cluster masters)."""
    found: dict[str, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if b"--executor-id" in cmd and application_id.encode() in cmd:
            found[cmd[cmd.index(b"--executor-id") + 1].decode()] = int(entry)
    return found


def kill_executor(application_id: str, executor_id: str) -> int:
    """SIGKILL the JVM of one executor; returns its pid."""
    pid = executor_pids(application_id)[executor_id]
    os.kill(pid, signal.SIGKILL)
    return pid


def local_state_dirs(root: str, job_id: str, operator_id: str, subtask: int) -> list[str]:
    """The local-state directories of a keyed subtask under ``root`` (the job's
    ``sparkpoint.local-state.dir``), one per executor that held it."""
    pattern = os.path.join(
        glob.escape(root), "sparkpoint-state", "*", "*", job_id, operator_id, str(subtask)
    )
    return sorted(glob.glob(pattern))


class ManualClock(FixedClock):
    """A clock that only moves when told: wall-clock and monotonic time are both ``ms``
    (set ``ms`` or call ``advance``)."""

    def __init__(self, ms: int = 0) -> None:
        super().__init__(ms)

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms`` milliseconds."""
        if ms < 0:
            raise ValueError(f"A clock does not go back; cannot advance by {ms} ms")
        self.ms += ms

    def __repr__(self) -> str:
        return f"ManualClock({self.ms})"


class InjectedFailure(RuntimeError):
    """The exception a ``FailureInjector`` raises."""


class FailureInjector:
    """Fires ``times`` failures in total, across processes, when ``maybe_fail`` sees
    ``at_record``; ``mode`` is ``"raise"`` (an exception) or ``"kill"`` (SIGKILL of the
    calling Python worker)."""

    def __init__(self, directory: str, at_record: int, times: int = 1, mode: str = "raise"):
        if mode not in ("raise", "kill"):
            raise ValueError("mode must be 'raise' or 'kill'")
        self.directory = directory
        self.at_record = at_record
        self.times = times
        self.mode = mode
        os.makedirs(directory, exist_ok=True)

    def fired(self) -> int:
        """How many failures fired so far."""
        return sum(1 for n in os.listdir(self.directory) if n.startswith("fired-"))

    def _claim(self) -> bool:
        for i in range(self.times):
            try:
                fd = os.open(
                    os.path.join(self.directory, f"fired-{i}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY
                )
            except FileExistsError:
                continue
            os.close(fd)
            return True
        return False

    def maybe_fail(self, record: int) -> None:
        """Fail here if this is the chosen record and failures remain."""
        if record != self.at_record or not self._claim():
            return
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFailure(f"injected failure at record {record}")


class CountAndEcho(KeyedProcessFunction):
    """A ``KeyedProcessFunction`` for exactly-once tests: echoes each record as
    ``("rec", key, value)``, keeps a count and a sum per key in ValueState, and when the
    input ends (a timer at the maximum watermark) emits ``("final", key, count, sum)``."""

    def __init__(self, injector: FailureInjector | None = None) -> None:
        self.injector = injector

    def open(self, runtime_context: Any) -> None:
        from sparkpoint.state.descriptors import ValueStateDescriptor
        from sparkpoint.state.typeinfo import Types

        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.total = runtime_context.get_state(ValueStateDescriptor("sum", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Any:
        key, x = value
        if self.injector is not None:
            self.injector.maybe_fail(x)
        count = self.count.value()
        if count is None:
            count = 0
            ctx.timer_service().register_event_time_timer(MAX_WATERMARK)
        self.count.update(count + 1)
        self.total.update((self.total.value() or 0) + x)
        yield ("rec", key, x)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ("final", ctx.get_current_key(), self.count.value(), self.total.value())

    def close(self) -> None:
        """Nothing to release."""


def expected_keyed_count_output(n_events: int, n_keys: int) -> tuple[set[tuple[Any, ...]], dict]:
    """What ``CountAndEcho`` over ``x -> (x % n_keys, x)`` for ``x in range(n_events)`` must
    produce: the echoed records and the final ``(count, sum)`` per key."""
    recs = {("rec", x % n_keys, x) for x in range(n_events)}
    finals: dict[int, tuple[int, int]] = {}
    for x in range(n_events):
        c, s = finals.get(x % n_keys, (0, 0))
        finals[x % n_keys] = (c + 1, s + x)
    return recs, finals
