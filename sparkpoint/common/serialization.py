"""``pyflink.common.serialization``: encoders for row-format file sinks."""

from sparkpoint.connectors.file_sink import Encoder

__all__ = ["Encoder"]
