"""Decoding the bytes PyFlink's coders wrote into state, by the descriptor's type information.

In process mode (PyFlink's default) Python state reaches the Java backend as byte arrays
its coders made, nested (as a real PyFlink 2.3 savepoint shows): a LONG as 8 big-endian
bytes, an INT as 4, a STRING as an int length and its UTF-8 bytes, a pickled value
(``Types.PICKLED_BYTE_ARRAY()`` or no type) as an int length and the pickle. Pickles are
code: they are loaded under the importer's pickle policy (``sparkpoint.state.pickling``),
plain data only unless the user opts in.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from sparkpoint.errors import CorruptStateError
from sparkpoint.state import pickling
from sparkpoint.state import typeinfo as ti
from sparkpoint.state_processor.flink.binary import DataInput
from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError

__all__ = ["coder_of", "decode_element", "pickle_policy"]

Reader = Callable[[DataInput], Any]

_FIXED: dict[str, Reader] = {
    "LONG": lambda inp: inp.i64(),
    "INT": lambda inp: inp.i32(),
    "SHORT": lambda inp: inp.i16(),
    "BYTE": lambda inp: inp.signed_byte(),
    "BOOLEAN": lambda inp: inp.byte() != 0,
    "DOUBLE": lambda inp: struct.unpack(">d", inp.take(8))[0],
    "FLOAT": lambda inp: struct.unpack(">f", inp.take(4))[0],
}


@contextmanager
def pickle_policy(allow: bool):  # type: ignore[no-untyped-def]
    """Unpickle under ``allow`` (True: any pickle; False: plain data only) for the block."""
    before = pickling.pickle_allowed()
    pickling.set_allow_pickle(allow)
    try:
        yield
    finally:
        pickling.set_allow_pickle(before)


def _pickled(what: str, nested: bool) -> Reader:
    def read(inp: DataInput) -> Any:
        data = inp.sized_bytes(what) if nested else bytes(inp.take(inp.remaining))
        try:
            return pickling.loads(data, what)
        except CorruptStateError as e:
            raise FlinkFormatError(f"{inp.what}: {what} is not a valid pickle: {e}") from e

    return read


def coder_of(info: ti.TypeInformation, what: str, nested: bool) -> Reader:
    """A reader of the bytes PyFlink's coder for ``info`` writes (``nested``: inside a map
    entry, where variable-length values carry their length)."""
    if isinstance(info, ti.PickledBytesTypeInfo):
        return _pickled(what, nested)
    if isinstance(info, ti.BasicTypeInfo):
        fixed = _FIXED.get(info.type_name)
        if fixed is not None:
            return fixed
        if info.type_name == "STRING":
            return lambda inp: _utf8(inp, what, nested)
    if isinstance(info, ti.PrimitiveArrayTypeInfo) and isinstance(info.element, ti.BasicTypeInfo):
        if info.element.type_name == "BYTE":
            return lambda inp: inp.sized_bytes(what) if nested else bytes(inp.take(inp.remaining))
    raise UnsupportedFlinkStateError(
        f"{what}: values of type {info!r} are not imported (the bytes PyFlink's coder of that "
        "type writes were not checked against a real savepoint); supported: LONG, INT, "
        "SHORT, BYTE, BOOLEAN, FLOAT, DOUBLE, STRING, PRIMITIVE_ARRAY(BYTE) and pickled "
        "values (PICKLED_BYTE_ARRAY, or no type)"
    )


def _utf8(inp: DataInput, what: str, nested: bool) -> str:
    data = inp.sized_bytes(what) if nested else bytes(inp.take(inp.remaining))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FlinkFormatError(f"{inp.what}: {what} is not UTF-8: {e}") from e


def decode_element(read: Reader, data: bytes, what: str) -> Any:
    """Decode one element's bytes completely (trailing bytes are corruption)."""
    inp = DataInput(data, what)
    value = read(inp)
    if inp.remaining:
        raise FlinkFormatError(f"{what}: {inp.remaining} bytes left after its value")
    return value
