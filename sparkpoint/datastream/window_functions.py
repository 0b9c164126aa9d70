"""Window functions, spelled as ``pyflink.datastream.functions``, and the internal adapters
that give the window operator one call shape for all of them.

A window function gets a window's contents when its trigger fires: all elements (``apply``,
``process``) or the one pre-aggregated value (``reduce``/``aggregate`` with a window
function). The runtime calls ``InternalWindowFunction.process(key, window, context,
contents)`` and ``clear(window, context)``; ``context`` is the runtime's window context.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from sparkpoint.state.functions import Function

__all__ = [
    "AllWindowFunction",
    "InternalWindowFunction",
    "ProcessAllWindowFunction",
    "ProcessWindowFunction",
    "WindowFunction",
    "internal_window_function",
]

IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")
CW = TypeVar("CW")  # the window type of a Context


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Evaluates a window of a keyed stream: ``apply(key, window, inputs)``."""

    @abstractmethod
    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Iterable[OUT]:
        """Output zero or more elements for the window's contents."""


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """Evaluates a window of a non-keyed stream (``window_all``): ``apply(window, inputs)``."""

    @abstractmethod
    def apply(self, window: W, inputs: Iterable[IN]) -> Iterable[OUT]:
        """Output zero or more elements for the window's contents."""


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """Evaluates a window of a keyed stream with a context: the window, time, and state per
    window (``window_state``) and per key (``global_state``)."""

    class Context(ABC, Generic[CW]):
        """Valid only during one call."""

        @abstractmethod
        def window(self) -> Any:
            """The window being evaluated."""

        @abstractmethod
        def current_processing_time(self) -> int: ...

        @abstractmethod
        def current_watermark(self) -> int: ...

        @abstractmethod
        def window_state(self) -> Any:
            """Keyed state scoped to the key and this window (cleared by ``clear``)."""

        @abstractmethod
        def global_state(self) -> Any:
            """Keyed state scoped to the key, shared by all its windows."""

    @abstractmethod
    def process(self, key: KEY, context: Any, elements: Iterable[IN]) -> Iterable[OUT]:
        """Output zero or more elements for the window's contents."""

    def clear(self, context: Any) -> None:
        """The window is removed: clear what ``window_state()`` holds for it."""


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """``ProcessWindowFunction`` for ``window_all``: ``process(context, elements)``."""

    Context = ProcessWindowFunction.Context

    @abstractmethod
    def process(self, context: Any, elements: Iterable[IN]) -> Iterable[OUT]:
        """Output zero or more elements for the window's contents."""

    def clear(self, context: Any) -> None:
        """The window is removed: clear what ``window_state()`` holds for it."""


class InternalWindowFunction(Function, ABC):
    """One call shape for every window function; ``contents`` is iterable."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def open(self, runtime_context: Any) -> None:
        open_ = getattr(self.function, "open", None)
        if open_ is not None:
            open_(runtime_context)

    def close(self) -> None:
        close = getattr(self.function, "close", None)
        if close is not None:
            close()

    @abstractmethod
    def process(self, key: Any, window: Any, context: Any, contents: Iterable[Any]) -> Any:
        """Call the user function's shape; returns its output (an iterable or None)."""

    def clear(self, window: Any, context: Any) -> None:
        """Nothing to clear for functions without per-window state."""


class _PassThrough(InternalWindowFunction):
    """No window function: the pre-aggregated value is the result."""

    def process(self, key: Any, window: Any, context: Any, contents: Iterable[Any]) -> Any:
        return contents


class _Apply(InternalWindowFunction):
    def process(self, key: Any, window: Any, context: Any, contents: Iterable[Any]) -> Any:
        return self.function.apply(key, window, contents)


class _ApplyAll(InternalWindowFunction):
    def process(self, key: Any, window: Any, context: Any, contents: Iterable[Any]) -> Any:
        return self.function.apply(window, contents)


class _Process(InternalWindowFunction):
    def process(self, key: Any, window: Any, context: Any, contents: Iterable[Any]) -> Any:
        return self.function.process(key, context, contents)

    def clear(self, window: Any, context: Any) -> None:
        self.function.clear(context)


class _ProcessAll(InternalWindowFunction):
    def process(self, key: Any, window: Any, context: Any, contents: Iterable[Any]) -> Any:
        return self.function.process(context, contents)

    def clear(self, window: Any, context: Any) -> None:
        self.function.clear(context)


def internal_window_function(function: Any, all_windows: bool) -> InternalWindowFunction:
    """The adapter for ``function`` (None: the pre-aggregated value itself)."""
    if function is None:
        return _PassThrough(None)
    if isinstance(function, (ProcessWindowFunction, ProcessAllWindowFunction)):
        if all_windows and isinstance(function, ProcessWindowFunction):
            raise TypeError("window_all(...) takes a ProcessAllWindowFunction")
        if not all_windows and isinstance(function, ProcessAllWindowFunction):
            raise TypeError("window(...) on a keyed stream takes a ProcessWindowFunction")
        return _ProcessAll(function) if all_windows else _Process(function)
    if isinstance(function, (WindowFunction, AllWindowFunction)):
        if all_windows and isinstance(function, WindowFunction):
            raise TypeError("window_all(...) takes an AllWindowFunction")
        if not all_windows and isinstance(function, AllWindowFunction):
            raise TypeError("window(...) on a keyed stream takes a WindowFunction")
        return _ApplyAll(function) if all_windows else _Apply(function)
    raise TypeError(
        "A window function must be a WindowFunction, AllWindowFunction, ProcessWindowFunction "
        f"or ProcessAllWindowFunction, got {type(function).__name__}"
    )
