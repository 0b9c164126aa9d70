"""``TimeDomain`` as ``pyflink.datastream.TimeDomain`` spells it (defined by the runtime)."""

from sparkpoint.runtime.time_domain import TimeDomain

__all__ = ["TimeDomain"]
