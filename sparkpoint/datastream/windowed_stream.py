"""``WindowedStream`` and ``AllWindowedStream``, spelled as in PyFlink.

``key_by(...).window(assigner)`` / ``count_window(...)`` and ``window_all(assigner)`` give
these; a window function (``reduce``, ``aggregate``, ``apply``, ``process``) ends them in a
window operator (``sparkpoint.runtime.operators.window_operator``). ``window_all`` keys every record
by the same key and runs at parallelism 1, as Flink does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkpoint.common.time import Time, to_millis
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.window import Trigger, WindowAssigner
from sparkpoint.datastream.window_functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
    internal_window_function,
)
from sparkpoint.runtime.graph import NodeKind
from sparkpoint.runtime.operators.window_operator import WindowSpec
from sparkpoint.state.functions import AggregateFunction, ReduceFunction, as_reduce_function

if TYPE_CHECKING:
    from sparkpoint.datastream.data_stream import DataStream, KeyedStream

__all__ = ["AllWindowedStream", "WindowedStream"]


class WindowedStream:
    """A keyed stream cut into windows; evaluate them with a window function."""

    _all = False

    def __init__(self, keyed_stream: KeyedStream, window_assigner: WindowAssigner) -> None:
        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError(
                f"window() takes a WindowAssigner, got {type(window_assigner).__name__}"
            )
        self._keyed_stream = keyed_stream
        self._assigner = window_assigner
        self._trigger: Trigger | None = None
        self._allowed_lateness = 0
        self._late_tag: OutputTag | None = None

    def get_execution_environment(self) -> Any:
        return self._keyed_stream.get_execution_environment()

    def get_input_type(self) -> Any:
        return self._keyed_stream.get_type()

    def trigger(self, trigger: Trigger) -> WindowedStream:
        """Replace the assigner's default trigger."""
        if not isinstance(trigger, Trigger):
            raise TypeError(f"trigger() takes a Trigger, got {type(trigger).__name__}")
        if callable(getattr(self._assigner, "merge_windows", None)) and not trigger.can_merge():
            raise TypeError(
                f"A merging window assigner cannot be used with a trigger that does not "
                f"support merging: {type(trigger).__name__}.can_merge() is False"
            )
        self._trigger = trigger
        return self

    def allowed_lateness(self, time_ms: int | Time) -> WindowedStream:
        """Keep windows (and accept late records) for this long after their end (event time)."""
        lateness = to_millis(time_ms, what="allowed lateness")
        if lateness < 0:
            raise ValueError(f"The allowed lateness cannot be negative, got {lateness}")
        self._allowed_lateness = lateness
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> WindowedStream:
        """Send records too late for every window to ``output_tag`` instead of dropping them."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(
                f"side_output_late_data() takes an OutputTag, got {type(output_tag).__name__}"
            )
        self._late_tag = output_tag
        return self

    # -- window functions -------------------------------------------------------------------
    def reduce(
        self,
        reduce_function: ReduceFunction | Callable[[Any, Any], Any],
        window_function: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        """Reduce each window incrementally; a window function, if given, sees the result."""
        fn = as_reduce_function(reduce_function)
        if output_type is None and window_function is None:
            output_type = self._keyed_stream.get_type()
        return self._build(
            "reduce", window_function, output_type, reduce_function=fn, name="Window(Reduce)"
        )

    def aggregate(
        self,
        aggregate_function: AggregateFunction,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        """Aggregate each window incrementally; a window function, if given, sees the result."""
        if not isinstance(aggregate_function, AggregateFunction):
            raise TypeError(
                f"aggregate() takes an AggregateFunction, got {type(aggregate_function).__name__}"
            )
        return self._build(
            "aggregate",
            window_function,
            output_type,
            aggregate_function=aggregate_function,
            name="Window(Aggregate)",
        )

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        """Evaluate each window's elements with a ``WindowFunction``."""
        return self._build("list", window_function, output_type, name="Window(Apply)")

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        """Evaluate each window's elements with a ``ProcessWindowFunction``."""
        expected = ProcessAllWindowFunction if self._all else ProcessWindowFunction
        if not isinstance(process_window_function, expected):
            raise TypeError(
                f"process() takes a {expected.__name__}, got "
                f"{type(process_window_function).__name__}"
            )
        return self._build("list", process_window_function, output_type, name="Window(Process)")

    def _build(
        self, contents: str, window_function: Any, output_type: Any, name: str, **functions: Any
    ) -> DataStream:
        if contents == "list" and window_function is None:
            raise TypeError("apply()/process() need a window function")
        if window_function is not None and not isinstance(
            window_function,
            (WindowFunction, AllWindowFunction, ProcessWindowFunction, ProcessAllWindowFunction),
        ):
            raise TypeError(
                "window_function must be a WindowFunction or ProcessWindowFunction (or their "
                f"All- forms for window_all), got {type(window_function).__name__}"
            )
        env = self._keyed_stream.get_execution_environment()
        trigger = self._trigger or self._assigner.get_default_trigger(env)
        spec = WindowSpec(
            assigner=self._assigner,
            trigger=trigger,
            window_function=internal_window_function(window_function, self._all),
            contents=contents,
            allowed_lateness=self._allowed_lateness,
            late_tag=self._late_tag,
            **functions,
        )
        stream = self._keyed_stream._derive(NodeKind.WINDOW, name, output_type, window=spec)
        if self._all:
            stream.set_parallelism(1).set_max_parallelism(1)
        return stream


class AllWindowedStream(WindowedStream):
    """A non-keyed stream cut into windows (``window_all``): one task sees every record."""

    _all = True
