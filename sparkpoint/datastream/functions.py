"""User-function base classes and contexts, spelled as ``pyflink.datastream.functions``.

Everything here is a contract: the runtime implements the contexts (``RuntimeContext``,
``ProcessFunction.Context``, ...) and calls the user's methods. Methods that "output zero or
more elements" (``flat_map``, ``process_element``, ``on_timer``) may ``yield`` elements,
return an iterable, or return None for no output, as in PyFlink.

The ``*Wrapper`` classes give the runtime one uniform object for whatever the user passed to
``map``/``flat_map``/``filter``/``key_by``/``reduce``: a plain callable or an instance of the
matching function class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from sparkpoint.datastream.async_functions import (
    AsyncFunction,
    AsyncRetryPredicate,
    AsyncRetryStrategies,
    AsyncRetryStrategy,
)
from sparkpoint.datastream.broadcast_functions import (
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from sparkpoint.datastream.time_domain import TimeDomain
from sparkpoint.datastream.timerservice import TimerService
from sparkpoint.datastream.window_functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from sparkpoint.metrics import Counter, Distribution, Meter, MetricGroup
from sparkpoint.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.state.functions import AggregateFunction, Function, ReduceFunction
from sparkpoint.state.key_groups import KeyGroupAssigner

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategies",
    "AsyncRetryStrategy",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "Counter",
    "Distribution",
    "FilterFunction",
    "FilterFunctionWrapper",
    "FlatMapFunction",
    "FlatMapFunctionWrapper",
    "Function",
    "FunctionWrapper",
    "KeySelector",
    "KeySelectorFunctionWrapper",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStateStore",
    "MapFunction",
    "MapFunctionWrapper",
    "Meter",
    "MetricGroup",
    "NullByteKeySelector",
    "Partitioner",
    "PartitionerFunctionWrapper",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "ReduceFunctionWrapper",
    "RuntimeContext",
    "SinkFunction",
    "SourceFunction",
    "TimerService",
    "TypedKeySelector",
    "WindowFunction",
]


# ---- runtime context ------------------------------------------------------------------------


class KeyedStateStore(ABC):
    """Access to keyed state of the current key (only on a ``KeyedStream``)."""

    @abstractmethod
    def get_state(self, state_descriptor: ValueStateDescriptor) -> Any:
        """The ``ValueState`` of ``state_descriptor`` for the current key."""

    @abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> Any:
        """The ``ListState`` of ``state_descriptor`` for the current key."""

    @abstractmethod
    def get_map_state(self, state_descriptor: MapStateDescriptor) -> Any:
        """The ``MapState`` of ``state_descriptor`` for the current key."""

    @abstractmethod
    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> Any:
        """The ``ReducingState`` of ``state_descriptor`` for the current key."""

    @abstractmethod
    def get_aggregating_state(self, state_descriptor: AggregatingStateDescriptor) -> Any:
        """The ``AggregatingState`` of ``state_descriptor`` for the current key."""


class RuntimeContext(KeyedStateStore):
    """What a parallel function instance knows about where it runs."""

    @abstractmethod
    def get_task_name(self) -> str:
        """The task name assigned during plan construction."""

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int:
        """The parallelism of the task."""

    @abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int:
        """The max parallelism (number of key groups) of the task."""

    @abstractmethod
    def get_index_of_this_subtask(self) -> int:
        """This subtask's index, from 0 to parallelism - 1."""

    @abstractmethod
    def get_attempt_number(self) -> int:
        """The attempt number of this subtask, 0 for the first."""

    @abstractmethod
    def get_task_name_with_subtasks(self) -> str:
        """The task name with the subtask indicator, e.g. ``"MyTask (3/6)"``."""

    @abstractmethod
    def get_job_parameter(self, key: str, default_value: str) -> str:
        """The global job parameter ``key``, or ``default_value``."""

    @abstractmethod
    def get_metrics_group(self) -> MetricGroup:
        """The metric group of this subtask."""


# ---- single-input functions -----------------------------------------------------------------


class MapFunction(Function):
    """Transforms each element into exactly one element."""

    @abstractmethod
    def map(self, value: Any) -> Any:
        """The transformed ``value``."""


class FlatMapFunction(Function):
    """Transforms each element into zero, one or more elements."""

    @abstractmethod
    def flat_map(self, value: Any) -> Iterable[Any] | None:
        """The elements produced for ``value`` (usually by ``yield``)."""


class FilterFunction(Function):
    """A predicate deciding which elements to keep."""

    @abstractmethod
    def filter(self, value: Any) -> bool:
        """True to keep ``value``."""


class KeySelector(Function):
    """Extracts the deterministic key of an element."""

    @abstractmethod
    def get_key(self, value: Any) -> Any:
        """The key of ``value``; must be the same on every call for the same element."""


class NullByteKeySelector(KeySelector):
    """Gives every element the key 0 (keyed operators on non-keyed streams)."""

    def get_key(self, value: Any) -> Any:
        """Always 0."""
        return 0


class Partitioner(Function):
    """Custom assignment of keys to partitions."""

    @abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int:
        """The partition index (0 .. num_partitions - 1) for ``key``."""


# ---- two-input functions --------------------------------------------------------------------


class CoMapFunction(Function):
    """A map over two connected streams (shared instance and state)."""

    @abstractmethod
    def map1(self, value: Any) -> Any:
        """Transform an element of the first stream."""

    @abstractmethod
    def map2(self, value: Any) -> Any:
        """Transform an element of the second stream."""


class CoFlatMapFunction(Function):
    """A flat map over two connected streams."""

    @abstractmethod
    def flat_map1(self, value: Any) -> Iterable[Any] | None:
        """Elements produced for an element of the first stream."""

    @abstractmethod
    def flat_map2(self, value: Any) -> Iterable[Any] | None:
        """Elements produced for an element of the second stream."""


# ---- process functions ----------------------------------------------------------------------


class ProcessFunction(Function):
    """Processes each element with access to its timestamp and the timer service."""

    class Context(ABC):
        """Valid only during one ``process_element`` call; do not keep it."""

        @abstractmethod
        def timer_service(self) -> TimerService:
            """The timer service for querying time and registering timers."""

        @abstractmethod
        def timestamp(self) -> int | None:
            """The timestamp of the current element, or None if it has none."""

    @abstractmethod
    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any] | None:
        """Process one element; output zero or more elements (usually by ``yield``)."""


class KeyedProcessFunction(Function):
    """Processes each element of a keyed stream with keyed state and keyed timers."""

    class Context(ABC):
        """Valid only during one call; do not keep it."""

        @abstractmethod
        def get_current_key(self) -> Any:
            """The key of the element (or timer) being processed."""

        @abstractmethod
        def timer_service(self) -> TimerService:
            """The timer service for querying time and registering timers."""

        @abstractmethod
        def timestamp(self) -> int | None:
            """The timestamp of the element or of the firing timer, or None."""

    class OnTimerContext(Context):
        """Context of ``on_timer``: also tells which time domain fired."""

        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """The time domain of the firing timer."""

    @abstractmethod
    def process_element(
        self, value: Any, ctx: KeyedProcessFunction.Context
    ) -> Iterable[Any] | None:
        """Process one element; output zero or more elements (usually by ``yield``)."""

    def on_timer(
        self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext
    ) -> Iterable[Any] | None:
        """Called when a timer fires; by default it outputs nothing."""
        return None


class CoProcessFunction(Function):
    """Processes the elements of two connected streams."""

    class Context(ABC):
        """Valid only during one call; do not keep it."""

        @abstractmethod
        def timer_service(self) -> TimerService:
            """The timer service for querying time and registering timers."""

        @abstractmethod
        def timestamp(self) -> int | None:
            """The timestamp of the current element, or None."""

    @abstractmethod
    def process_element1(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable[Any] | None:
        """Process an element of the first stream."""

    @abstractmethod
    def process_element2(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable[Any] | None:
        """Process an element of the second stream."""


class KeyedCoProcessFunction(Function):
    """Processes the elements of two connected keyed streams, with keyed state and timers."""

    class Context(ABC):
        """Valid only during one call; do not keep it."""

        @abstractmethod
        def get_current_key(self) -> Any:
            """The key of the element (or timer) being processed."""

        @abstractmethod
        def timer_service(self) -> TimerService:
            """The timer service for querying time and registering timers."""

        @abstractmethod
        def timestamp(self) -> int | None:
            """The timestamp of the element or of the firing timer, or None."""

    class OnTimerContext(Context):
        """Context of ``on_timer``: also tells which time domain fired."""

        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """The time domain of the firing timer."""

    @abstractmethod
    def process_element1(
        self, value: Any, ctx: KeyedCoProcessFunction.Context
    ) -> Iterable[Any] | None:
        """Process an element of the first stream."""

    @abstractmethod
    def process_element2(
        self, value: Any, ctx: KeyedCoProcessFunction.Context
    ) -> Iterable[Any] | None:
        """Process an element of the second stream."""

    def on_timer(
        self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext
    ) -> Iterable[Any] | None:
        """Called when a timer fires; by default it outputs nothing."""
        return None


# ---- legacy source and sink shapes ------------------------------------------------------


class SourceFunction(Function):
    """PyFlink's ``SourceFunction``: a wrapper of a Java source class (its name or object).

    Accepted so programs import and build; ``add_source`` refuses it with the replacement to
    use (``from_source`` with a sparkpoint ``Source``, see ``docs/spark-sources.md``).
    """

    def __init__(self, source_func: Any) -> None:
        self.source_func = source_func


class SinkFunction(Function):
    """PyFlink's ``SinkFunction``: a wrapper of a Java sink class (its name or object).

    Accepted so programs import and build; ``add_sink`` refuses it with the replacement to
    use (``sink_to`` with a sparkpoint ``Sink``, see ``docs/spark-writers.md``).
    """

    def __init__(self, sink_func: Any) -> None:
        self.sink_func = sink_func


# ---- wrappers for plain callables -----------------------------------------------------------


class FunctionWrapper(Function):
    """Uniform object around a plain callable or a user ``Function`` instance."""

    _expected: type[Function] = Function
    _method: str = ""

    def __init__(self, func: Any) -> None:
        self._wrapped_function: Function | None = None
        if isinstance(func, self._expected) and self._method:
            self._wrapped_function = func
            self._func: Callable[..., Any] = getattr(func, self._method)
        elif callable(func) and not isinstance(func, Function):
            self._func = func
        else:
            raise TypeError(
                f"{type(self).__name__} needs a callable or a {self._expected.__name__}, "
                f"got {type(func).__name__}"
            )

    @property
    def wrapped(self) -> Any:
        """The user's callable or function instance."""
        return self._wrapped_function if self._wrapped_function is not None else self._func

    def open(self, runtime_context: Any) -> None:
        """Open the wrapped function instance, if any."""
        if self._wrapped_function is not None:
            self._wrapped_function.open(runtime_context)

    def close(self) -> None:
        """Close the wrapped function instance, if any."""
        if self._wrapped_function is not None:
            self._wrapped_function.close()


class MapFunctionWrapper(FunctionWrapper, MapFunction):
    """A ``MapFunction`` around ``fn(value) -> value`` or a ``MapFunction``."""

    _expected = MapFunction
    _method = "map"

    def map(self, value: Any) -> Any:
        """Call the wrapped function."""
        return self._func(value)


class FlatMapFunctionWrapper(FunctionWrapper, FlatMapFunction):
    """A ``FlatMapFunction`` around ``fn(value) -> iterable`` or a ``FlatMapFunction``."""

    _expected = FlatMapFunction
    _method = "flat_map"

    def flat_map(self, value: Any) -> Iterable[Any] | None:
        """Call the wrapped function."""
        return self._func(value)


class FilterFunctionWrapper(FunctionWrapper, FilterFunction):
    """A ``FilterFunction`` around ``fn(value) -> bool`` or a ``FilterFunction``."""

    _expected = FilterFunction
    _method = "filter"

    def filter(self, value: Any) -> bool:
        """Call the wrapped function (its result taken as truthy/falsy)."""
        return bool(self._func(value))


class KeySelectorFunctionWrapper(FunctionWrapper, KeySelector):
    """A ``KeySelector`` around ``fn(value) -> key`` or a ``KeySelector``."""

    _expected = KeySelector
    _method = "get_key"

    def get_key(self, value: Any) -> Any:
        """Call the wrapped function."""
        return self._func(value)


class TypedKeySelector(KeySelector):
    """A key selector whose keys have a declared type (``key_by(..., key_type=...)``): its
    ``key_group_assigner`` places them in key groups by that type's Java ``hashCode``."""

    def __init__(self, selector: KeySelector, key_group_assigner: KeyGroupAssigner) -> None:
        self.selector = selector
        self.key_group_assigner = key_group_assigner

    def open(self, runtime_context: Any) -> None:
        """Open the wrapped selector."""
        self.selector.open(runtime_context)

    def close(self) -> None:
        """Close the wrapped selector."""
        self.selector.close()

    def get_key(self, value: Any) -> Any:
        """The wrapped selector's key."""
        return self.selector.get_key(value)


class ReduceFunctionWrapper(FunctionWrapper, ReduceFunction):
    """A ``ReduceFunction`` around ``fn(a, b) -> value`` or a ``ReduceFunction``."""

    _expected = ReduceFunction
    _method = "reduce"

    def reduce(self, value1: Any, value2: Any) -> Any:
        """Call the wrapped function."""
        return self._func(value1, value2)


class PartitionerFunctionWrapper(FunctionWrapper, Partitioner):
    """A ``Partitioner`` around ``fn(key, num_partitions) -> int`` or a ``Partitioner``."""

    _expected = Partitioner
    _method = "partition"

    def partition(self, key: Any, num_partitions: int) -> int:
        """Call the wrapped function."""
        return int(self._func(key, num_partitions))
