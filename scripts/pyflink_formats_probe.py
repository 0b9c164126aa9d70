"""Run inside the PyFlink venv by scripts/record_pyflink_formats.py: PyFlink 2.3's Avro and CSV
row schemas write the cases' rows and read bytes back, through PyFlink's Python classes and
their Java objects (no job: the schemas are what a Kafka connector calls).

Rows cross as JSON texts: Flink's own ``JsonRowDeserializationSchema`` turns a case's JSON row
into the Java ``Row`` the schema writes, and ``JsonRowSerializationSchema`` turns a ``Row`` the
schema read into JSON. Reads ``argv[1]`` (cases plus the bytes sparkpoint wrote), writes
``argv[2]``. Not a module of the project: it imports only PyFlink.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

from pyflink.common.typeinfo import Types
from pyflink.datastream.formats.avro import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
)
from pyflink.datastream.formats.csv import (
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
)
from pyflink.java_gateway import get_gateway


def _opened(j_schema: Any) -> Any:
    j_schema.open(None)  # the row schemas' open() reads nothing from its context
    return j_schema


def _json_rows(j_type: Any) -> tuple[Any, Any]:
    """Flink's JSON row (de)serializer for a Java type info: JSON text <-> Java Row."""
    formats = get_gateway().jvm.org.apache.flink.formats.json
    reader = _opened(formats.JsonRowDeserializationSchema.Builder(j_type).build())
    writer = _opened(formats.JsonRowSerializationSchema.builder().withTypeInfo(j_type).build())
    return reader, writer


def _error(exc: Exception) -> str:
    """The Java exception's message chain (first line of each cause)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    parts = []
    while java is not None:
        parts.append(f"{java.getClass().getName()}: {java.getMessage()}".splitlines()[0])
        java = java.getCause()
    return " / ".join(parts)


def _read_all(j_reader: Any, json_writer: Any, messages: list[bytes]) -> list[Any]:
    """Each message read: the row's JSON text, null (skipped), or {"error": ...}."""
    out: list[Any] = []
    for message in messages:
        try:
            row = j_reader.deserialize(message)
        except Exception as exc:  # recorded: sparkpoint must fail on the same messages
            out.append({"error": _error(exc)})
            continue
        out.append(None if row is None else bytes(json_writer.serialize(row)).decode("utf-8"))
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _write_all(j_writer: Any, json_reader: Any, rows: list[Any]) -> list[Any]:
    out: list[Any] = []
    for row in rows:
        j_row = json_reader.deserialize(json.dumps(row).encode("utf-8"))
        try:
            out.append(_b64(bytes(j_writer.serialize(j_row))))
        except Exception as exc:
            out.append({"error": _error(exc)})
    return out


def avro_case(case: dict[str, Any], sparkpoint: dict[str, Any]) -> dict[str, Any]:
    schema = json.dumps(case["schema"])
    j_reader = _opened(
        AvroRowDeserializationSchema(avro_schema_string=schema)._j_deserialization_schema
    )
    j_writer = _opened(
        AvroRowSerializationSchema(avro_schema_string=schema)._j_serialization_schema
    )
    j_type = j_reader.getProducedType()
    declared = eval(case["type"], {"Types": Types})
    if str(declared.get_java_type_info().toString()) != str(j_type.toString()):
        raise SystemExit(
            f"avro case {case['name']}: type {declared.get_java_type_info().toString()} "
            f"is not the schema's {j_type.toString()}"
        )
    json_reader, json_writer = _json_rows(j_type)
    written = _write_all(j_writer, json_reader, case["rows"])
    own = [_unb64(w) for w in written if isinstance(w, str)]
    return {
        "written": written,
        "read": _read_all(j_reader, json_writer, own),
        "read_messages": _read_all(
            j_reader, json_writer, [_unb64(m) for m in case.get("messages", [])]
        ),
        "read_sparkpoint": _read_all(
            j_reader, json_writer, [_unb64(m) for m in sparkpoint.get("written", [])]
        ),
    }


_SER_OPTIONS = {
    "field_delimiter": "set_field_delimiter",
    "line_delimiter": "set_line_delimiter",
    "array_element_delimiter": "set_array_element_delimiter",
    "quote_character": "set_quote_character",
    "escape_character": "set_escape_character",
    "null_literal": "set_null_literal",
}
_DE_OPTIONS = {
    "field_delimiter": "set_field_delimiter",
    "allow_comments": "set_allow_comments",
    "array_element_delimiter": "set_array_element_delimiter",
    "quote_character": "set_quote_character",
    "escape_character": "set_escape_character",
    "null_literal": "set_null_literal",
    "ignore_parse_errors": "set_ignore_parse_errors",
}


def csv_case(case: dict[str, Any], sparkpoint: dict[str, Any]) -> dict[str, Any]:
    type_info = eval(case["type"], {"Types": Types})
    ser = CsvRowSerializationSchema.Builder(type_info)
    for key, value in case.get("serializer", {}).items():
        if key == "disable_quote_character":
            ser = ser.disable_quote_character()
        else:
            ser = getattr(ser, _SER_OPTIONS[key])(value)
    de = CsvRowDeserializationSchema.Builder(type_info)
    for key, value in case.get("deserializer", {}).items():
        de = getattr(de, _DE_OPTIONS[key])(value)
    j_writer = _opened(ser.build()._j_serialization_schema)
    j_reader = _opened(de.build()._j_deserialization_schema)
    json_reader, json_writer = _json_rows(type_info.get_java_type_info())
    written = _write_all(j_writer, json_reader, case["rows"])
    own = [_unb64(w) for w in written if isinstance(w, str)]
    return {
        "written": written,
        "read": _read_all(j_reader, json_writer, own),
        "read_messages": _read_all(
            j_reader, json_writer, [m.encode("utf-8") for m in case.get("messages", [])]
        ),
        "read_sparkpoint": _read_all(
            j_reader, json_writer, [_unb64(m) for m in sparkpoint.get("written", [])]
        ),
    }


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        given = json.load(f)
    cases, sparkpoint = given["cases"], given["sparkpoint"]
    out: dict[str, Any] = {"avro": {}, "csv": {}}
    for case in cases["avro"]:
        out["avro"][case["name"]] = avro_case(case, sparkpoint["avro"].get(case["name"], {}))
    for case in cases["csv"]:
        out["csv"][case["name"]] = csv_case(case, sparkpoint["csv"].get(case["name"], {}))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
