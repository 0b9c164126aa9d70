"""What encoding a row costs in the Avro and CSV row formats, by library: prints one JSON
line per (format, library, direction) with rows per second, median of ``--repeats`` runs.

Avro: sparkpoint's schemas (fastavro under them) against fastavro alone on the same datums and
the ``avro`` package (Apache Avro's Python library), the same schema and datums. CSV:
sparkpoint's schemas against Python's ``csv`` module writing and reading the same fields
(its quoting is not Jackson's, so it can read but not write Flink's bytes).

The ``avro`` package is the comparison only (``pip install avro``); fastavro comes with the
``avro`` extra.

    python bench/bench_row_formats.py              # 20,000 rows
    python bench/bench_row_formats.py --rows 1000  # a quick check that it runs
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sparkpoint.common import Types
from sparkpoint.connectors.avro_row_schemas import (
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
)
from sparkpoint.connectors.csv_row_schemas import (
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
)
from sparkpoint.types import Row

SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
CSV_TYPE = Types.ROW_NAMED(
    ["id", "name", "score", "ok", "note"],
    [Types.LONG(), Types.STRING(), Types.DOUBLE(), Types.BOOLEAN(), Types.STRING()],
)


def timed(fn: Callable[[], Any], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def report(fmt: str, library: str, direction: str, rows: int, seconds: float) -> None:
    line = {
        "format": fmt,
        "library": library,
        "direction": direction,
        "rows": rows,
        "rows_per_s": round(rows / seconds),
    }
    print(json.dumps(line), flush=True)


def bench_avro(rows: list[Row], repeats: int) -> None:
    import avro.io
    import avro.schema
    import fastavro

    text = json.dumps(SCHEMA)
    ser = AvroRowSerializationSchema(avro_schema_string=text)
    de = AvroRowDeserializationSchema(avro_schema_string=text)
    written = [ser.serialize(r) for r in rows]
    datums = [dict(zip([f["name"] for f in SCHEMA["fields"]], r)) for r in rows]
    parsed = fastavro.parse_schema(SCHEMA)

    def fastavro_write() -> None:
        for d in datums:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, d)

    def fastavro_read() -> None:
        for b in written:
            fastavro.schemaless_reader(io.BytesIO(b), parsed, None)

    apache = avro.schema.parse(text)
    writer, reader = avro.io.DatumWriter(apache), avro.io.DatumReader(apache)

    def avro_write() -> None:
        for d in datums:
            out = io.BytesIO()
            writer.write(d, avro.io.BinaryEncoder(out))

    def avro_read() -> None:
        for b in written:
            reader.read(avro.io.BinaryDecoder(io.BytesIO(b)))

    n = len(rows)
    report(
        "avro",
        "sparkpoint(fastavro)",
        "write",
        n,
        timed(lambda: [ser.serialize(r) for r in rows], repeats),
    )
    report("avro", "fastavro", "write", n, timed(fastavro_write, repeats))
    report("avro", "avro", "write", n, timed(avro_write, repeats))
    report(
        "avro",
        "sparkpoint(fastavro)",
        "read",
        n,
        timed(lambda: [de.deserialize(b) for b in written], repeats),
    )
    report("avro", "fastavro", "read", n, timed(fastavro_read, repeats))
    report("avro", "avro", "read", n, timed(avro_read, repeats))


def bench_csv(rows: list[Row], repeats: int) -> None:
    ser = CsvRowSerializationSchema.Builder(CSV_TYPE).build()
    de = CsvRowDeserializationSchema.Builder(CSV_TYPE).build()
    flat = [tuple(r)[:5] for r in rows]
    written = [ser.serialize(r) for r in flat]

    def csv_write() -> None:
        for r in flat:
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerow(r)
            out.getvalue().encode("utf-8")

    def csv_read() -> None:
        for b in written:
            next(csv.reader(io.StringIO(b.decode("utf-8"), newline="")))

    n = len(rows)
    report(
        "csv", "sparkpoint", "write", n, timed(lambda: [ser.serialize(r) for r in flat], repeats)
    )
    report("csv", "csv module", "write", n, timed(csv_write, repeats))
    report(
        "csv", "sparkpoint", "read", n, timed(lambda: [de.deserialize(b) for b in written], repeats)
    )
    report("csv", "csv module", "read", n, timed(csv_read, repeats))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = [
        Row(
            id=i,
            name=f"name-{i}",
            score=i / 7,
            ok=i % 2 == 0,
            note=None if i % 3 else f"note {i}",
            tags=["a", "b"],
        )
        for i in range(args.rows)
    ]
    bench_avro(rows, args.repeats)
    bench_csv(rows, args.repeats)


if __name__ == "__main__":
    main()
