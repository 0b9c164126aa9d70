"""The state descriptors of tumbling_window.py's window (uid ``windows``), for the import:
PyFlink keeps a window's contents as the state ``window-contents``, here a list of the
records (the stream is untyped: pickled)."""

from sparkpoint.common import Types
from sparkpoint.datastream.state import ListStateDescriptor

STATES = {"windows": [ListStateDescriptor("window-contents", Types.PICKLED_BYTE_ARRAY())]}
