"""The state descriptors of timer_buffer.py's buffer (uid ``buffer``), for the import."""

from sparkpoint.common import Types
from sparkpoint.datastream.state import ListStateDescriptor, ValueStateDescriptor

STATES = {
    "buffer": [
        ValueStateDescriptor("seen", Types.LONG()),
        ListStateDescriptor("buffer", Types.PICKLED_BYTE_ARRAY()),
    ]
}
