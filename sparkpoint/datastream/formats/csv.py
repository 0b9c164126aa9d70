"""``pyflink.datastream.formats.csv``: ``CsvRowSerializationSchema`` and
``CsvRowDeserializationSchema`` (built with their ``Builder``), and ``CsvSchema`` with its
builder (the columns and options of a CSV file, as Jackson's ``CsvSchema``)."""

from __future__ import annotations

from sparkpoint.connectors.csv_row_schemas import (
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
)
from sparkpoint.errors import ConfigurationError
from sparkpoint.state.typeinfo import RowTypeInfo, TypeInformation, Types

__all__ = [
    "CsvRowDeserializationSchema",
    "CsvRowSerializationSchema",
    "CsvSchema",
    "CsvSchemaBuilder",
]


class CsvSchema:
    """A CSV file's columns (names and types, as a ``RowTypeInfo``) and options."""

    def __init__(self, columns: list[tuple[str, TypeInformation]], options: dict[str, object]):
        self.columns = list(columns)
        self.options = dict(options)
        self.row_type = RowTypeInfo([t for _, t in columns], [n for n, _ in columns])

    @staticmethod
    def builder() -> CsvSchemaBuilder:
        """A :class:`CsvSchemaBuilder`."""
        return CsvSchemaBuilder()

    def size(self) -> int:
        """The number of columns."""
        return len(self.columns)

    def __len__(self) -> int:
        return self.size()

    def __str__(self) -> str:
        names = ", ".join(f'"{n}"' for n, _ in self.columns)
        return f"CsvSchema(columns=[{names}], options={self.options})"

    __repr__ = __str__


def _one_char(value: str, what: str) -> str:
    if len(value) != 1:
        raise ValueError(f"{what} must be a single char, got {value}")
    return value


class CsvSchemaBuilder:
    """Builds a :class:`CsvSchema` (PyFlink's builder; column types are ``Types``, where
    PyFlink takes ``DataTypes``: sparkpoint has no Table API)."""

    def __init__(self) -> None:
        self._columns: list[tuple[str, TypeInformation]] = []
        self._options: dict[str, object] = {
            "column_separator": ",",
            "quote_char": '"',
            "escape_char": None,
            "line_separator": "\n",
            "null_value": "",
            "array_element_separator": ";",
            "allow_comments": False,
            "skip_first_data_row": False,
            "use_header": False,
            "strict_headers": False,
        }

    def build(self) -> CsvSchema:
        """The schema."""
        return CsvSchema(self._columns, self._options)

    def _add(self, name: str, t: TypeInformation) -> CsvSchemaBuilder:
        if not isinstance(t, TypeInformation):
            raise ConfigurationError(
                f"column {name!r}: the type must be a sparkpoint Types.*() value, got {t!r}"
            )
        self._columns.append((name, t))
        return self

    def add_array_column(
        self, name: str, separator: str = ";", element_type: TypeInformation | None = None
    ) -> CsvSchemaBuilder:
        """An array column (elements ``element_type``, STRING by default)."""
        self._options.setdefault("array_separators", {})
        self._options["array_separators"][name] = separator  # type: ignore[index]
        return self._add(name, Types.BASIC_ARRAY(element_type or Types.STRING()))

    def add_boolean_column(self, name: str) -> CsvSchemaBuilder:
        """A BOOLEAN column."""
        return self._add(name, Types.BOOLEAN())

    def add_number_column(
        self, name: str, number_type: TypeInformation | None = None
    ) -> CsvSchemaBuilder:
        """A number column (``number_type``, LONG by default: Flink's BIGINT)."""
        return self._add(name, number_type or Types.LONG())

    def add_string_column(self, name: str) -> CsvSchemaBuilder:
        """A STRING column."""
        return self._add(name, Types.STRING())

    def add_columns_from(self, schema: CsvSchema) -> CsvSchemaBuilder:
        """All of another schema's columns."""
        self._columns.extend(schema.columns)
        return self

    def clear_columns(self) -> CsvSchemaBuilder:
        """No columns."""
        self._columns.clear()
        return self

    def set_allow_comments(self, allow: bool = True) -> CsvSchemaBuilder:
        """Lines starting with ``#`` are comments."""
        self._options["allow_comments"] = allow
        return self

    def set_any_property_name(self, name: str) -> CsvSchemaBuilder:
        """The name extra columns are collected under."""
        self._options["any_property_name"] = name
        return self

    def disable_array_element_separator(self) -> CsvSchemaBuilder:
        """Array element separator ``""``."""
        self._options["array_element_separator"] = ""
        return self

    def remove_array_element_separator(self, index: int) -> CsvSchemaBuilder:
        """Array element separator ``""`` for the column at ``index``."""
        self._options.setdefault("array_separators", {})
        self._options["array_separators"][self._columns[index][0]] = ""  # type: ignore[index]
        return self

    def set_array_element_separator(self, separator: str) -> CsvSchemaBuilder:
        """The array element separator (``;``)."""
        self._options["array_element_separator"] = separator
        return self

    def set_column_separator(self, char: str) -> CsvSchemaBuilder:
        """The column separator (``,``)."""
        self._options["column_separator"] = _one_char(char, "Column separator")
        return self

    def disable_escape_char(self) -> CsvSchemaBuilder:
        """No escape character."""
        self._options["escape_char"] = None
        return self

    def set_escape_char(self, char: str) -> CsvSchemaBuilder:
        """The escape character (none by default)."""
        self._options["escape_char"] = _one_char(char, "Escape char")
        return self

    def set_line_separator(self, separator: str) -> CsvSchemaBuilder:
        """The line separator written (``\\n``)."""
        self._options["line_separator"] = separator
        return self

    def set_null_value(self, null_value: str) -> CsvSchemaBuilder:
        """The text of null (empty)."""
        self._options["null_value"] = null_value
        return self

    def disable_quote_char(self) -> CsvSchemaBuilder:
        """No quote character."""
        self._options["quote_char"] = None
        return self

    def set_quote_char(self, char: str) -> CsvSchemaBuilder:
        """The quote character (``"``)."""
        self._options["quote_char"] = _one_char(char, "Quote char")
        return self

    def set_skip_first_data_row(self, skip: bool = True) -> CsvSchemaBuilder:
        """Skip the first row."""
        self._options["skip_first_data_row"] = skip
        return self

    def set_strict_headers(self, strict: bool = True) -> CsvSchemaBuilder:
        """Check the header's names against the columns."""
        self._options["strict_headers"] = strict
        return self

    def set_use_header(self, use: bool = True) -> CsvSchemaBuilder:
        """The first line is a header."""
        self._options["use_header"] = use
        return self

    def size(self) -> int:
        """The number of columns so far."""
        return len(self._columns)

    def __len__(self) -> int:
        return self.size()
