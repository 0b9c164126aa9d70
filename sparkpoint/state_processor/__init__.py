"""The state processor: keyed state of savepoints and checkpoints as Spark DataFrames.

Flink's State Processor API on Spark, in PyFlink's vocabulary. ``SavepointReader`` reads the
keyed state of an operator of a savepoint or retained checkpoint (heap or RocksDB, full or
incremental, any parallelism) as a typed DataFrame, computed by Spark tasks that read key
groups straight from storage. ``SavepointWriter`` writes a new savepoint from DataFrames
(``OperatorTransformation.bootstrap_with(df).key_by(column).transform(*states)``) or
transforms an existing one; executors write the key-group streams, the driver
``_metadata``. Sits beside ``runtime/``: it may use PySpark, and nothing below it imports
it. See ``docs/state-processor.md``. ``import_flink_savepoint`` (``flink/``) writes a
savepoint from a PyFlink job's Flink savepoint (``docs/flink-migration.md``).
"""

from sparkpoint.state_processor.flink import import_flink_savepoint
from sparkpoint.state_processor.reader import SavepointReader
from sparkpoint.state_processor.snapshot_reading import OperatorInfo
from sparkpoint.state_processor.state_info import StateInfo
from sparkpoint.state_processor.writer import (
    OperatorTransformation,
    SavepointWriter,
    StateBootstrapTransformation,
)

__all__ = [
    "OperatorInfo",
    "OperatorTransformation",
    "SavepointReader",
    "SavepointWriter",
    "StateBootstrapTransformation",
    "StateInfo",
    "import_flink_savepoint",
]
