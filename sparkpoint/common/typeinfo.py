"""``Types`` and the type information classes, as ``pyflink.common.typeinfo`` spells them."""

from sparkpoint.state.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
    Types,
)

__all__ = [
    "BasicArrayTypeInfo",
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "PickledBytesTypeInfo",
    "PrimitiveArrayTypeInfo",
    "RowTypeInfo",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
]
