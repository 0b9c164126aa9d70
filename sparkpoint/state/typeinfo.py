"""Type information as ``pyflink.common.typeinfo.Types`` spells it.

A ``TypeInformation`` decides the state serializer (``create_serializer()``) and the Arrow
type (``to_arrow_type()``) the runtime uses for columnar batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from sparkpoint.state import serializers as s

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


class TypeInformation:
    """Describes a value type: its serializer and its Arrow type."""

    def create_serializer(self) -> s.TypeSerializer:
        """A serializer for values of this type."""
        raise TypeError(f"{type(self).__name__} cannot create a serializer")

    def get_serializer(self) -> s.TypeSerializer:
        """Alias of ``create_serializer`` (the serializer is cached)."""
        cached = self.__dict__.get("_serializer")
        if cached is None:
            cached = self.create_serializer()
            self.__dict__["_serializer"] = cached
        return cached

    def to_arrow_type(self) -> pa.DataType:
        """The Arrow type for columns of this type."""
        raise TypeError(f"{type(self).__name__} has no Arrow type")

    def _key(self) -> Any:
        return self.get_serializer().snapshot_config()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeInformation) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(repr(self._key()))


_ARROW: dict[str, pa.DataType] = {
    "STRING": pa.string(),
    "BYTE": pa.int8(),
    "BOOLEAN": pa.bool_(),
    "SHORT": pa.int16(),
    "INT": pa.int32(),
    "LONG": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "CHAR": pa.string(),
    "BIG_INT": pa.decimal128(38, 0),
    "BIG_DEC": pa.string(),
    "INSTANT": pa.timestamp("ns", tz="UTC"),
    "SQL_DATE": pa.date32(),
    "SQL_TIME": pa.time64("us"),
    "SQL_TIMESTAMP": pa.timestamp("us"),
}


class BasicTypeInfo(TypeInformation):
    """A basic type: STRING, BYTE, BOOLEAN, SHORT, INT, LONG, FLOAT, DOUBLE, CHAR, ... ."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def create_serializer(self) -> s.TypeSerializer:
        return s.serializer_from_config(self.type_name)

    def to_arrow_type(self) -> pa.DataType:
        return _ARROW[self.type_name]

    def __repr__(self) -> str:
        return f"BasicTypeInfo({self.type_name})"


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object, pickled (PyFlink's default for untyped state)."""

    def create_serializer(self) -> s.TypeSerializer:
        return s.PickleSerializer()

    def to_arrow_type(self) -> pa.DataType:
        return pa.binary()

    def __repr__(self) -> str:
        return "PickledByteArrayTypeInfo"


class PrimitiveArrayTypeInfo(TypeInformation):
    """An array of a primitive type without nulls; PRIMITIVE_ARRAY(BYTE) is ``bytes``."""

    def __init__(self, element: TypeInformation) -> None:
        self.element = element

    def create_serializer(self) -> s.TypeSerializer:
        if isinstance(self.element, BasicTypeInfo) and self.element.type_name == "BYTE":
            return s.BytesSerializer()
        return s.ListSerializer(self.element.get_serializer(), "PRIMITIVE_ARRAY")

    def to_arrow_type(self) -> pa.DataType:
        if isinstance(self.element, BasicTypeInfo) and self.element.type_name == "BYTE":
            return pa.binary()
        return pa.list_(self.element.to_arrow_type())

    def __repr__(self) -> str:
        return f"PrimitiveArrayTypeInfo<{self.element!r}>"


class BasicArrayTypeInfo(TypeInformation):
    """An array of a basic type (elements may be null)."""

    def __init__(self, element: TypeInformation) -> None:
        self.element = element

    def create_serializer(self) -> s.TypeSerializer:
        return s.ListSerializer(self.element.get_serializer(), "BASIC_ARRAY")

    def to_arrow_type(self) -> pa.DataType:
        return pa.list_(self.element.to_arrow_type())

    def __repr__(self) -> str:
        return f"BasicArrayTypeInfo<{self.element!r}>"


class ListTypeInfo(TypeInformation):
    """A Python list of one element type."""

    def __init__(self, element: TypeInformation) -> None:
        self.element = element

    def create_serializer(self) -> s.TypeSerializer:
        return s.ListSerializer(self.element.get_serializer())

    def to_arrow_type(self) -> pa.DataType:
        return pa.list_(self.element.to_arrow_type())

    def __repr__(self) -> str:
        return f"ListTypeInfo<{self.element!r}>"


class MapTypeInfo(TypeInformation):
    """A Python dict with typed keys and values."""

    def __init__(self, key_type: TypeInformation, value_type: TypeInformation) -> None:
        self.key_type = key_type
        self.value_type = value_type

    def create_serializer(self) -> s.TypeSerializer:
        return s.MapSerializer(self.key_type.get_serializer(), self.value_type.get_serializer())

    def to_arrow_type(self) -> pa.DataType:
        return pa.map_(self.key_type.to_arrow_type(), self.value_type.to_arrow_type())

    def __repr__(self) -> str:
        return f"MapTypeInfo<{self.key_type!r}, {self.value_type!r}>"


class RowTypeInfo(TypeInformation):
    """A ``Row`` of typed fields; named fields default to f0, f1, ... as in PyFlink."""

    def __init__(
        self, field_types: Sequence[TypeInformation], field_names: Sequence[str] | None = None
    ) -> None:
        self.field_types = list(field_types)
        self._named = field_names is not None
        self.field_names = (
            list(field_names)
            if field_names is not None
            else [f"f{i}" for i in range(len(self.field_types))]
        )
        if len(self.field_names) != len(self.field_types):
            raise ValueError(
                f"{len(self.field_names)} field names for {len(self.field_types)} field types"
            )

    def get_field_names(self) -> list[str]:
        """The field names."""
        return list(self.field_names)

    def get_field_types(self) -> list[TypeInformation]:
        """The field types."""
        return list(self.field_types)

    def get_field_index(self, field_name: str) -> int:
        """Position of ``field_name`` (-1 if absent)."""
        return self.field_names.index(field_name) if field_name in self.field_names else -1

    def create_serializer(self) -> s.TypeSerializer:
        return s.RowSerializer(
            [t.get_serializer() for t in self.field_types],
            self.field_names if self._named else None,
        )

    def to_arrow_type(self) -> pa.DataType:
        return pa.struct(
            [pa.field(n, t.to_arrow_type()) for n, t in zip(self.field_names, self.field_types)]
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}: {t!r}" for n, t in zip(self.field_names, self.field_types))
        return f"RowTypeInfo({fields})"


class TupleTypeInfo(TypeInformation):
    """A Python tuple of typed fields."""

    def __init__(self, field_types: Sequence[TypeInformation]) -> None:
        self.field_types = list(field_types)

    def get_field_types(self) -> list[TypeInformation]:
        """The field types."""
        return list(self.field_types)

    def create_serializer(self) -> s.TypeSerializer:
        return s.TupleSerializer([t.get_serializer() for t in self.field_types])

    def to_arrow_type(self) -> pa.DataType:
        return pa.struct(
            [pa.field(f"f{i}", t.to_arrow_type()) for i, t in enumerate(self.field_types)]
        )

    def __repr__(self) -> str:
        return f"TupleTypeInfo({', '.join(repr(t) for t in self.field_types)})"


class Types:
    """Factories for type information, spelled as ``pyflink.common.typeinfo.Types``."""

    @staticmethod
    def STRING() -> TypeInformation:
        """Text (``str``)."""
        return BasicTypeInfo("STRING")

    @staticmethod
    def BYTE() -> TypeInformation:
        """Signed 8-bit integer."""
        return BasicTypeInfo("BYTE")

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        """``bool``."""
        return BasicTypeInfo("BOOLEAN")

    @staticmethod
    def SHORT() -> TypeInformation:
        """Signed 16-bit integer."""
        return BasicTypeInfo("SHORT")

    @staticmethod
    def INT() -> TypeInformation:
        """Signed 32-bit integer."""
        return BasicTypeInfo("INT")

    @staticmethod
    def LONG() -> TypeInformation:
        """Signed 64-bit integer."""
        return BasicTypeInfo("LONG")

    @staticmethod
    def FLOAT() -> TypeInformation:
        """32-bit float."""
        return BasicTypeInfo("FLOAT")

    @staticmethod
    def DOUBLE() -> TypeInformation:
        """64-bit float."""
        return BasicTypeInfo("DOUBLE")

    @staticmethod
    def CHAR() -> TypeInformation:
        """A single character (one UTF-16 unit)."""
        return BasicTypeInfo("CHAR")

    @staticmethod
    def BIG_INT() -> TypeInformation:
        """Arbitrary-precision ``int``."""
        return BasicTypeInfo("BIG_INT")

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        """``decimal.Decimal``."""
        return BasicTypeInfo("BIG_DEC")

    @staticmethod
    def INSTANT() -> TypeInformation:
        """A UTC instant (tz-aware ``datetime``)."""
        return BasicTypeInfo("INSTANT")

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        """``datetime.date``."""
        return BasicTypeInfo("SQL_DATE")

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        """``datetime.time``."""
        return BasicTypeInfo("SQL_TIME")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        """Naive ``datetime.datetime``."""
        return BasicTypeInfo("SQL_TIMESTAMP")

    @staticmethod
    def LOCAL_DATE() -> TypeInformation:
        """``datetime.date`` (PyFlink 1.15+ name; same encoding as SQL_DATE)."""
        return BasicTypeInfo("SQL_DATE")

    @staticmethod
    def LOCAL_TIME() -> TypeInformation:
        """``datetime.time`` (same encoding as SQL_TIME)."""
        return BasicTypeInfo("SQL_TIME")

    @staticmethod
    def LOCAL_DATE_TIME() -> TypeInformation:
        """Naive ``datetime.datetime`` (same encoding as SQL_TIMESTAMP)."""
        return BasicTypeInfo("SQL_TIMESTAMP")

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:
        """An array of objects of one type (elements may be null)."""
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        """Any picklable Python object."""
        return PickledBytesTypeInfo()

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:
        """An array of a primitive type."""
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:
        """An array of a basic type."""
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def ROW(field_types: list[TypeInformation]) -> TypeInformation:
        """A positional ``Row``."""
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list[str], field_types: list[TypeInformation]) -> TypeInformation:
        """A ``Row`` with named fields."""
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list[TypeInformation]) -> TypeInformation:
        """A tuple."""
        return TupleTypeInfo(field_types)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> TypeInformation:
        """A list."""
        return ListTypeInfo(element_type_info)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> TypeInformation:
        """A dict."""
        return MapTypeInfo(key_type_info, value_type_info)
