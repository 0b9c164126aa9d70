"""``pyflink.datastream.execution_mode``."""

from sparkpoint.datastream.stream_execution_environment import RuntimeExecutionMode

__all__ = ["RuntimeExecutionMode"]
