"""The Avro and CSV row schemas' errors: bad options, rows that do not fit, bytes that are not
a datum, and the Avro extra missing, each failing with a message naming what is wrong."""

from __future__ import annotations

import decimal
import json
import subprocess
import sys

import pytest

from sparkpoint.common import Types
from sparkpoint.datastream.formats.avro import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
)
from sparkpoint.datastream.formats.csv import (
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
    CsvSchema,
)
from sparkpoint.errors import ConfigurationError
from sparkpoint.types import Row

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "id", "type": "long"},
            {
                "name": "dec",
                "type": {"type": "bytes", "logicalType": "decimal", "scale": 2, "precision": 6},
            },
            {"name": "next", "type": ["null", "R"]},
        ],
    }
)


def test_avro_schema_arguments() -> None:
    with pytest.raises(TypeError, match="record_class or avro_schema_string should be specified"):
        AvroRowSerializationSchema()
    with pytest.raises(ConfigurationError, match="names a Java class"):
        AvroRowDeserializationSchema(record_class="com.example.User")
    with pytest.raises(ConfigurationError, match="not JSON"):
        AvroRowSerializationSchema(avro_schema_string="{nope")
    with pytest.raises(ConfigurationError, match="must be an Avro record schema"):
        AvroRowSerializationSchema(avro_schema_string='"string"')


def test_avro_rows_that_do_not_fit_and_bytes_that_are_not_a_datum() -> None:
    ser = AvroRowSerializationSchema(avro_schema_string=SCHEMA)
    de = AvroRowDeserializationSchema(avro_schema_string=SCHEMA)
    with pytest.raises(ValueError, match=r"R.id: null for the non-nullable type long"):
        ser.serialize(Row(id=None, dec=decimal.Decimal("1.00"), next=None))
    with pytest.raises(ValueError, match=r"R.dec: Decimal\('1.001'\) does not fit .* scale 2"):
        ser.serialize(Row(id=1, dec=decimal.Decimal("1.001"), next=None))
    with pytest.raises(ValueError, match="the row has 2 fields, the record 3"):
        ser.serialize((1, decimal.Decimal(1)))
    # a recursive record: written and read through itself
    chain = Row(
        id=1, dec=decimal.Decimal("-1.28"), next=Row(id=2, dec=decimal.Decimal(0), next=None)
    )
    data = ser.serialize(chain)
    assert de.deserialize(data) == chain
    with pytest.raises(ValueError, match=f"Failed to deserialize Avro record \\({len(data) - 1} "):
        de.deserialize(data[:-1])


def test_the_avro_extra_missing_is_named() -> None:
    probe = (
        "import sys; sys.modules['fastavro'] = None\n"
        "from sparkpoint.datastream.formats.avro import AvroRowSerializationSchema as S\n"
        f"S(avro_schema_string={SCHEMA!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 1
    assert "The Avro row format needs fastavro: pip install 'sparkpoint[avro]'" in done.stderr


def test_csv_options_and_types() -> None:
    row = Types.ROW_NAMED(["a"], [Types.STRING()])
    with pytest.raises(TypeError, match="Type information must not be None"):
        CsvRowSerializationSchema.Builder(None)
    with pytest.raises(ConfigurationError, match="field delimiter must be a single character"):
        CsvRowSerializationSchema.Builder(row).set_field_delimiter("ab")
    with pytest.raises(ConfigurationError, match="Unsupported new line delimiter"):
        CsvRowSerializationSchema.Builder(row).set_line_delimiter(";")
    with pytest.raises(ConfigurationError, match="for field 'm'"):
        CsvRowDeserializationSchema.Builder(
            Types.ROW_NAMED(["m"], [Types.MAP(Types.STRING(), Types.LONG())])
        )
    ser = CsvRowSerializationSchema.Builder(row).build()
    with pytest.raises(ValueError, match="2 fields, the type has 1"):
        ser.serialize(("x", "y"))
    de = CsvRowDeserializationSchema.Builder(Types.ROW_NAMED(["n"], [Types.INT()])).build()
    with pytest.raises(ValueError, match="Failed to deserialize CSV row 'x'"):
        de.deserialize(b"x")


def test_csv_schema_builder() -> None:
    schema = (
        CsvSchema.builder()
        .add_number_column("id", number_type=Types.INT())
        .add_string_column("name")
        .add_array_column("tags", ",", element_type=Types.STRING())
        .add_boolean_column("ok")
        .set_column_separator("|")
        .set_escape_char("\\")
        .set_use_header()
        .build()
    )
    assert len(schema) == 4
    assert schema.row_type.get_field_names() == ["id", "name", "tags", "ok"]
    assert schema.options["column_separator"] == "|" and schema.options["use_header"] is True
    with pytest.raises(ValueError, match="Quote char must be a single char"):
        CsvSchema.builder().set_quote_char("''")
