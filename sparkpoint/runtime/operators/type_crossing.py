"""Where PyFlink records cross to Java and back, their declared type converts them.

A source with ``type_info`` and every stage exit (shuffle, union) convert whole batches with
``batch_converter`` (``Row`` objects, 32-bit floats, range-checked integers); untyped
(pickled) streams have no converter and pass through untouched.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.runtime.operators.chain import Operator
from sparkpoint.state.type_conversion import BatchConverter, batch_converter

__all__ = ["TypedSourceOperator", "crossing_converter"]


def crossing_converter(type_info: Any) -> BatchConverter | None:
    """The batch converter of a stream's declared type (``None``: nothing to do)."""
    return batch_converter(type_info)


class TypedSourceOperator(Operator):
    """A source whose records are declared with ``type_info``: converts each batch read."""

    def __init__(self, operator_id: str, name: str, convert: BatchConverter) -> None:
        super().__init__(operator_id, name)
        self.convert = convert

    def process(self, values, timestamps):  # type: ignore[no-untyped-def]
        return self.convert(values), timestamps
