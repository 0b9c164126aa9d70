"""Connectors under PyFlink's names: ``pyflink.datastream.connectors`` → here."""

from sparkpoint.connectors.delivery import DeliveryGuarantee
from sparkpoint.connectors.sink import Sink
from sparkpoint.connectors.source import Source
from sparkpoint.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    FileSourceBuilder,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource

__all__ = [
    "DeliveryGuarantee",
    "FileSink",
    "FileSource",
    "FileSourceBuilder",
    "NumberSequenceSource",
    "OutputFileConfig",
    "RollingPolicy",
    "Sink",
    "Source",
    "StreamFormat",
]
