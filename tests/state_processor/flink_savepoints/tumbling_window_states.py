"""The state descriptors of tumbling_window.py's window (uid ``windows``), for the import:
PyFlink keeps a window's contents as the state ``window-contents``, here a list of the
records (the stream is untyped: pickled)."""

from sparkpoint.common import Types
from sparkpoint.datastream.functions import AggregateFunction
from sparkpoint.datastream.state import AggregatingStateDescriptor, ListStateDescriptor

STATES = {"windows": [ListStateDescriptor("window-contents", Types.PICKLED_BYTE_ARRAY())]}


class Collect(AggregateFunction):
    """tumbling_aggregate.py's Collect (its accumulator is the window's contents)."""

    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return 0, ()

    def add(self, value, accumulator):  # type: ignore[no-untyped-def]
        return accumulator[0] + 1, (*accumulator[1], f"{value[1]}@{value[2]}")

    def get_result(self, accumulator):  # type: ignore[no-untyped-def]
        return accumulator

    def merge(self, a, b):  # type: ignore[no-untyped-def]
        return a[0] + b[0], a[1] + b[1]


# tumbling_aggregate.py's window: the contents are Collect's accumulator
AGGREGATE_STATES = {
    "windows": [
        AggregatingStateDescriptor("window-contents", Collect(), Types.PICKLED_BYTE_ARRAY())
    ]
}
