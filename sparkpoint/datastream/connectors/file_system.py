"""``pyflink.datastream.connectors.file_system``."""

from sparkpoint.connectors.file_sink import (
    FileSink,
    FileSinkBuilder,
    OutputFileConfig,
    RollingPolicy,
)
from sparkpoint.connectors.file_source import FileSource, FileSourceBuilder, StreamFormat

__all__ = [
    "FileSink",
    "FileSinkBuilder",
    "FileSource",
    "FileSourceBuilder",
    "OutputFileConfig",
    "RollingPolicy",
    "StreamFormat",
]
