"""The state descriptors of keyed_lists.py's counter (uid ``counter``), for the import."""

from sparkpoint.common import Types
from sparkpoint.datastream.functions import AggregateFunction
from sparkpoint.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
)


class Mean(AggregateFunction):
    """keyed_lists.py's Mean (only its accumulator is state)."""

    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return 0, 0

    def add(self, value, accumulator):  # type: ignore[no-untyped-def]
        return accumulator[0] + value, accumulator[1] + 1

    def get_result(self, accumulator):  # type: ignore[no-untyped-def]
        return round(accumulator[0] / accumulator[1], 3)

    def merge(self, a, b):  # type: ignore[no-untyped-def]
        return a[0] + b[0], a[1] + b[1]


STATES = {
    "counter": [
        ListStateDescriptor("seen", Types.STRING()),
        ReducingStateDescriptor("sum", lambda a, b: a + b, Types.LONG()),
        AggregatingStateDescriptor("mean", Mean(), Types.PICKLED_BYTE_ARRAY()),
    ]
}
KEY_TYPES = {"counter": Types.STRING()}
