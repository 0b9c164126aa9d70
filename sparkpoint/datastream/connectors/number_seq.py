"""``pyflink.datastream.connectors.number_seq``."""

from sparkpoint.connectors.number_seq import NumberSequenceSource

__all__ = ["NumberSequenceSource"]
