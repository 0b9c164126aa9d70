"""Importing a PyFlink job's Flink savepoint into sparkpoint (issue 42), pure Python.

``metadata`` reads ``_metadata``; ``keyed_state`` the canonical keyed state streams;
``pyflink_state`` decodes PyFlink's process-mode state by the program's descriptors;
``timers`` and ``windows`` turn its timers and window state into sparkpoint's;
``importer`` writes the sparkpoint savepoint. See docs/flink-migration.md.
"""

from sparkpoint.state_processor.flink.errors import FlinkFormatError, UnsupportedFlinkStateError
from sparkpoint.state_processor.flink.importer import import_flink_savepoint
from sparkpoint.state_processor.flink.metadata import FlinkMetadata, read_metadata_file
from sparkpoint.state_processor.flink.pyflink_state import read_pyflink_keyed_state

__all__ = [
    "FlinkFormatError",
    "FlinkMetadata",
    "UnsupportedFlinkStateError",
    "import_flink_savepoint",
    "read_metadata_file",
    "read_pyflink_keyed_state",
]
