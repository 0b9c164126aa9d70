"""``pyflink.datastream.connectors.base``: ``DeliveryGuarantee`` and the connector bases."""

from sparkpoint.connectors.delivery import DeliveryGuarantee
from sparkpoint.connectors.sink import Sink
from sparkpoint.connectors.source import Source

__all__ = ["DeliveryGuarantee", "Sink", "Source"]
