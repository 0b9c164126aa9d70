"""The Avro and CSV row cases (cases.json) as sparkpoint schemas and rows, shared by the
differential tests and scripts/record_pyflink_formats.py.

Rows are JSON objects in cases.json; both sides turn them into rows with their JSON row
format of the case's type (Flink's in the recording, sparkpoint's here), so a case's rows
are the same values on both sides."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from sparkpoint.common import Types
from sparkpoint.connectors.avro_row_schemas import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
)
from sparkpoint.connectors.csv_row_schemas import (
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
)
from sparkpoint.connectors.json_row_schemas import JsonRowDeserializationSchema

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases.json"
RECORDED = HERE / "pyflink_recorded.json"


def load_cases() -> dict[str, list[dict[str, Any]]]:
    return json.loads(CASES.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def row_type(case: dict[str, Any]) -> Any:
    return eval(case["type"], {"Types": Types})  # the repository's own test data


def json_rows(case: dict[str, Any]) -> JsonRowDeserializationSchema:
    return JsonRowDeserializationSchema.builder().type_info(row_type(case)).build()


def rows(case: dict[str, Any]) -> list[Any]:
    reader = json_rows(case)
    return [reader.deserialize(json.dumps(r).encode("utf-8")) for r in case["rows"]]


def avro_schemas(case: dict[str, Any]) -> tuple[Any, Any]:
    text = json.dumps(case["schema"])
    return (
        AvroRowSerializationSchema(avro_schema_string=text),
        AvroRowDeserializationSchema(avro_schema_string=text),
    )


def csv_schemas(case: dict[str, Any]) -> tuple[Any, Any]:
    t = row_type(case)
    ser = CsvRowSerializationSchema.Builder(t)
    for key, value in case.get("serializer", {}).items():
        if key == "disable_quote_character":
            ser = ser.disable_quote_character()
        else:
            ser = getattr(ser, f"set_{key}")(value)
    de = CsvRowDeserializationSchema.Builder(t)
    for key, value in case.get("deserializer", {}).items():
        de = getattr(de, f"set_{key}")(value)
    return ser.build(), de.build()


def schemas(fmt: str, case: dict[str, Any]) -> tuple[Any, Any]:
    return avro_schemas(case) if fmt == "avro" else csv_schemas(case)


def sparkpoint_written() -> dict[str, dict[str, dict[str, list[Any]]]]:
    """The bytes (base64) sparkpoint writes for every case's rows, or {"error": ...}."""
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    for fmt, cases in load_cases().items():
        out[fmt] = {}
        for case in cases:
            writer, _ = schemas(fmt, case)
            written: list[Any] = []
            for row in rows(case):
                try:
                    written.append(base64.b64encode(writer.serialize(row)).decode("ascii"))
                except ValueError as exc:
                    written.append({"error": str(exc)})
            out[fmt][case["name"]] = {"written": written}
    return out
