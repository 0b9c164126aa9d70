"""The state descriptors of keyed_typed.py's counter (uid ``counter``) and its key type,
for the import."""

from sparkpoint.common import Time, Types
from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from tests.state_processor.flink_savepoints.keyed_lists_states import Mean

_last = ValueStateDescriptor("last", Types.LONG())
_last.enable_time_to_live(StateTtlConfig.new_builder(Time.days(36500)).build())

STATES = {
    "counter": [
        ListStateDescriptor("seen", Types.STRING()),
        ReducingStateDescriptor("sum", lambda a, b: a + b, Types.LONG()),
        AggregatingStateDescriptor("mean", Mean(), Types.PICKLED_BYTE_ARRAY()),
        _last,
    ]
}
KEY_TYPES = {"counter": Types.INT()}
