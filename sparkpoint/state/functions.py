"""The user function shapes that reducing and aggregating state call (PyFlink's names)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

__all__ = ["AggregateFunction", "Function", "ReduceFunction", "as_reduce_function"]


class Function(abc.ABC):  # noqa: B024 - PyFlink's base has only optional hooks
    """Base of user functions: optional ``open``/``close`` lifecycle hooks."""

    def open(self, runtime_context: Any) -> None:  # noqa: B027 - optional hook
        """Called once before the first record."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once after the last record."""


class ReduceFunction(Function):
    """Combines two values of the same type into one."""

    @abc.abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any:
        """The combination of ``value1`` and ``value2``."""


class AggregateFunction(Function):
    """Incremental aggregation through an accumulator."""

    @abc.abstractmethod
    def create_accumulator(self) -> Any:
        """A new, empty accumulator."""

    @abc.abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any:
        """Add ``value`` to ``accumulator``; returns the (possibly new) accumulator."""

    @abc.abstractmethod
    def get_result(self, accumulator: Any) -> Any:
        """The aggregate result of ``accumulator``."""

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        """Merge two accumulators (session windows); returns the merged accumulator."""
        raise TypeError(f"{type(self).__name__} does not support merging accumulators")


class _LambdaReduceFunction(ReduceFunction):
    """A ``ReduceFunction`` around a plain callable."""

    def __init__(self, func: Callable[[Any, Any], Any]) -> None:
        self._func = func

    def reduce(self, value1: Any, value2: Any) -> Any:
        return self._func(value1, value2)


def as_reduce_function(func: ReduceFunction | Callable[[Any, Any], Any]) -> ReduceFunction:
    """``func`` if it is a ReduceFunction, else a wrapper calling it (PyFlink takes both)."""
    if isinstance(func, ReduceFunction):
        return func
    if callable(func):
        return _LambdaReduceFunction(func)
    raise TypeError(
        f"reduce_function must be a ReduceFunction or callable, got {type(func).__name__}"
    )
