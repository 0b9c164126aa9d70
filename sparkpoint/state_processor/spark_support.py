"""What the reader and writer need from Spark: task DataFrames, schemas, executor setup."""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from sparkpoint.state_processor.type_mapping import PICKLED_METADATA

__all__ = [
    "PAYLOAD_SCHEMA",
    "ExecutorSetup",
    "is_pickled_field",
    "payload_frame",
    "payloads",
    "spark_schema",
]

PAYLOAD_SCHEMA = "payload binary"


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark ``StructType`` of an Arrow schema; the pickled-bytes marker of a field
    becomes Spark field metadata."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    fields = []
    for f in schema:
        meta = (
            {PICKLED_METADATA: True}
            if f.metadata and PICKLED_METADATA.encode() in (f.metadata)
            else None
        )
        fields.append(StructField(f.name, from_arrow_type(f.type), f.nullable, meta))
    return StructType(fields)


def is_pickled_field(field: Any) -> bool:
    """Whether a Spark field carries the pickled-bytes marker (read from untyped state)."""
    return bool((field.metadata or {}).get(PICKLED_METADATA))


def payload_frame(spark: Any, items: Sequence[Any]) -> Any:
    """A DataFrame with one row per item (its pickle in ``payload``), one row per partition,
    so that Spark runs one task per item."""
    rows = [(pickle.dumps(item, protocol=5),) for item in items]
    rdd = spark.sparkContext.parallelize(rows, max(1, len(rows)))
    return spark.createDataFrame(rdd, PAYLOAD_SCHEMA)


def payloads(batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
    """The items of the ``payload`` rows a task of ``payload_frame`` receives."""
    for batch in batches:
        for data in batch.column(0).to_pylist():
            yield pickle.loads(data)


class ExecutorSetup:
    """File-system options of the driver (``sparkpoint.fs.configure``), applied in each task
    before it touches storage, as the job runtime does."""

    def __init__(self, allow_pickle: bool | None = None) -> None:
        from sparkpoint.fs.registry import get_options
        from sparkpoint.state.pickling import pickle_allowed

        self.fs_options = dict(get_options())
        # sparkpoint.snapshot.allow-pickle of the reader (default: the driver process's)
        self.allow_pickle = pickle_allowed() if allow_pickle is None else allow_pickle

    def apply(self) -> None:
        """Configure this worker's file systems and pickle reading like the driver's."""
        from sparkpoint.fs.registry import configure, get_options
        from sparkpoint.state.pickling import set_allow_pickle

        set_allow_pickle(self.allow_pickle)
        if self.fs_options and dict(get_options()) != self.fs_options:
            configure(self.fs_options)
