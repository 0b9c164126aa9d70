"""What user functions see inside a task: runtime context, process contexts, timer service.

The classes follow PyFlink's contexts by duck typing (same method names), so the runtime does
not import the API layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from sparkpoint.clock import SYSTEM_CLOCK, Clock
from sparkpoint.common.watermark_strategy import MAX_WATERMARK, MIN_WATERMARK
from sparkpoint.metrics import MetricGroup
from sparkpoint.runtime.operators.time_domain import TimeDomain

__all__ = [
    "MAX_WATERMARK",
    "MIN_WATERMARK",
    "KeyedContext",
    "OperatorEnv",
    "ProcessContext",
    "StreamRuntimeContext",
]

TIMERS_STATE = "__sparkpoint_timers__"
_EVENT_TIME = TimeDomain.EVENT_TIME.value  # user-key domains of the timers state
_PROCESSING_TIME = TimeDomain.PROCESSING_TIME.value


@dataclass
class OperatorEnv:
    """Per-task facts and services shared by the operators of a stage."""

    job_id: str
    task_name: str
    epoch: int
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int
    end_of_input: bool
    job_parameters: dict[str, str] = field(default_factory=dict)
    watermark: int = MIN_WATERMARK  # during processing: the watermark the epoch started with
    generator_state: dict[str, int] = field(default_factory=dict)
    keyed_backend: Callable[[str], Any] = lambda op_id: None
    # Broadcast operators: the subtask's operator-state backend (runtime/task/carried_state.py).
    operator_state_backend: Callable[[str], Any] = lambda op_id: None
    timer_index: Callable[[str], list[int | None]] = lambda op_id: [None, None]
    report_watermark: Callable[[str, int, int | None], None] = lambda *a: None
    # Processing time: the task passes the epoch's clock (the driver's time, see EpochSpec).
    clock: Clock = SYSTEM_CLOCK
    # operator id -> its metric group in this task (the task reports what is registered).
    metric_group: Callable[[str], MetricGroup] = lambda op_id: MetricGroup()


class StreamRuntimeContext:
    """PyFlink's ``RuntimeContext``: task facts and, on keyed streams, keyed state."""

    def __init__(
        self, env: OperatorEnv, name: str, backend: Any | None, operator_id: str | None = None
    ) -> None:
        self._env = env
        self._name = name
        self._backend = backend
        self._operator_id = operator_id if operator_id is not None else name

    def get_task_name(self) -> str:
        return self._name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._env.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._env.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._env.subtask_index

    def get_attempt_number(self) -> int:
        return self._env.attempt_number

    def get_task_name_with_subtasks(self) -> str:
        return f"{self._name} ({self._env.subtask_index + 1}/{self._env.parallelism})"

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return self._env.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> MetricGroup:
        """The operator's metric group in this subtask (``<job>.<operator>.<subtask>``)."""
        return self._env.metric_group(self._operator_id)

    def _keyed(self, what: str) -> Any:
        if self._backend is None:
            raise RuntimeError(
                f"Keyed state ({what}) is only supported on a KeyedStream: "
                "call key_by(...) before this operator."
            )
        return self._backend

    def get_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_state").get_partitioned_state(state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_list_state").get_partitioned_state(state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_map_state").get_partitioned_state(state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_reducing_state").get_partitioned_state(state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_aggregating_state").get_partitioned_state(state_descriptor)


class _NonKeyedTimerService:
    """Timer service of a non-keyed ``ProcessFunction``: time only, no timers (as Flink)."""

    def __init__(self, env: OperatorEnv) -> None:
        self._env = env

    def current_processing_time(self) -> int:
        return self._env.clock.now_ms()

    def current_watermark(self) -> int:
        return self._env.watermark

    def _refuse(self, *args: Any) -> None:
        raise RuntimeError("Setting timers is only supported on a keyed streams.")

    register_processing_time_timer = _refuse
    register_event_time_timer = _refuse
    delete_processing_time_timer = _refuse
    delete_event_time_timer = _refuse


class ProcessContext:
    """``ProcessFunction.Context``."""

    def __init__(self, env: OperatorEnv) -> None:
        self._timer_service = _NonKeyedTimerService(env)
        self.current_timestamp: int | None = None

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def timer_service(self) -> _NonKeyedTimerService:
        return self._timer_service


class KeyedContext:
    """``KeyedProcessFunction.Context`` and ``OnTimerContext``, with keyed timers.

    Timers are keyed state (a map of ``(TimeDomain value, timestamp)`` per key), so they are
    checkpointed, restored and rescaled with the key groups like any other state.
    """

    def __init__(self, env: OperatorEnv, backend: Any, operator_id: str) -> None:
        self._env = env
        self._backend = backend
        self.current_key: Any = None
        self.current_timestamp: int | None = None
        self._time_domain: TimeDomain | None = None
        self._timers_state: Any = None
        # [earliest event-time, earliest processing-time] timer, None when unknown.
        self._index = env.timer_index(operator_id)

    # -- Context ---------------------------------------------------------------------------
    def get_current_key(self) -> Any:
        return self.current_key

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def timer_service(self) -> KeyedContext:
        return self

    def time_domain(self) -> TimeDomain:
        """The domain of the timer being fired (``on_timer``); PROCESSING_TIME elsewhere."""
        return self._time_domain or TimeDomain.PROCESSING_TIME

    # -- TimerService ----------------------------------------------------------------------
    def current_processing_time(self) -> int:
        return self._env.clock.now_ms()

    def current_watermark(self) -> int:
        return self._env.watermark

    def _timers(self) -> Any:
        if self._timers_state is None:
            from sparkpoint.state.descriptors import MapStateDescriptor
            from sparkpoint.state.typeinfo import Types

            self._timers_state = self._backend.get_partitioned_state(
                MapStateDescriptor(TIMERS_STATE, Types.PICKLED_BYTE_ARRAY(), Types.BOOLEAN())
            )
        return self._timers_state

    def _register(self, domain: int, timestamp: int) -> None:
        ts = int(timestamp)
        timers = self._timers_state or self._timers()
        timers.put((domain, ts), True)
        index = self._index
        current = index[domain]
        if current is not None and ts < current:
            index[domain] = ts

    def register_event_time_timer(self, timestamp: int) -> None:
        self._register(_EVENT_TIME, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._register(_PROCESSING_TIME, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._timers().remove((TimeDomain.EVENT_TIME.value, int(timestamp)))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._timers().remove((TimeDomain.PROCESSING_TIME.value, int(timestamp)))

    # -- firing ----------------------------------------------------------------------------
    def due_timers(self) -> list[tuple[int, TimeDomain, Any]]:
        """Remove and return ``(timestamp, domain, key)`` of every due timer, oldest first
        (``pop_due_timers`` without the key groups)."""
        return [(ts, domain, key) for ts, domain, key, _kg in self.pop_due_timers()]

    def pop_due_timers(self) -> list[tuple[int, TimeDomain, Any, int]]:
        """Remove and return ``(timestamp, domain, key, key group)`` of every due timer, in
        timestamp order (event time before processing time at equal timestamps).

        The timers state is read only when the index says a timer may be due (or does not
        know): an epoch with nothing to fire costs nothing. No current key is set per key
        while reading: the heap backend makes one pass over the timers' entries, RocksDB
        keeps them in time order and reads only the due ones (``RocksDBTimerTable``).
        """
        watermark = self._env.watermark
        now = self._env.clock.now_ms()
        ev, proc = self._index
        if ev is not None and proc is not None and ev > watermark and proc > now:
            return []
        self._timers()  # registers the timers state if this task has not yet
        limits = (watermark, now)  # indexed by TimeDomain value
        due, earliest = self._backend.pop_due_timers(TIMERS_STATE, limits)
        self._index[:] = [MAX_WATERMARK + 1 if ts is None else ts for ts in earliest]
        domains = (TimeDomain(0), TimeDomain(1))
        due.sort(key=itemgetter(0, 1))  # stable: key-group order among equal timers
        return [(ts, domains[d], key, kg) for ts, d, key, kg in due]

    def enter_timer(self, timestamp: int, domain: TimeDomain, key: Any) -> None:
        self.current_key = key
        self.current_timestamp = timestamp  # Flink: the timer's time, in either domain
        self._time_domain = domain

    def leave_timer(self) -> None:
        self._time_domain = None
