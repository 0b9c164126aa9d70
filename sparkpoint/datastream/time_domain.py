"""``TimeDomain`` as ``pyflink.datastream.TimeDomain`` spells it (defined by the runtime)."""

from sparkpoint.runtime.operators.time_domain import TimeDomain

__all__ = ["TimeDomain"]
