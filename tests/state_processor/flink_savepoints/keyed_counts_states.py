"""The state descriptors of keyed_counts.py's counter (uid ``counter``), for the import:
``sparkpoint savepoint import-flink ... --states tests.state_processor.flink_savepoints.
keyed_counts_states:STATES``."""

from sparkpoint.common import Types
from sparkpoint.datastream.state import MapStateDescriptor, ValueStateDescriptor

STATES = {
    "counter": [
        ValueStateDescriptor("count", Types.LONG()),
        ValueStateDescriptor("total", Types.PICKLED_BYTE_ARRAY()),
        MapStateDescriptor("items", Types.STRING(), Types.LONG()),
    ]
}
