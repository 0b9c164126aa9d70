"""BIG_DEC, SQL_DATE, SQL_TIME, and SQL_TIMESTAMP typed records: what Python receives and
how print() spells them (Java's toString)."""

import datetime
import decimal

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
decs = env.from_collection([decimal.Decimal("1.10"), decimal.Decimal("-0.000001"),
                            decimal.Decimal("12345678901234567890.5")], type_info=Types.BIG_DEC())
decs.print("decimal")
decs.map(lambda d: "%s %s" % (type(d).__name__, d), Types.STRING()).print("decimal-seen")
dates = env.from_collection([datetime.date(2024, 2, 29), datetime.date(1969, 12, 31)],
                            type_info=Types.SQL_DATE())
dates.print("date")
dates.map(lambda d: "%s %s" % (type(d).__name__, d.isoformat()), Types.STRING()).print("date-seen")
times = env.from_collection([datetime.time(13, 5, 7), datetime.time(0, 0, 0, 500000)],
                            type_info=Types.SQL_TIME())
times.print("time")
stamps = env.from_collection([datetime.datetime(2024, 1, 2, 3, 4, 5),
                              datetime.datetime(2024, 1, 2, 3, 4, 5, 123000)],
                             type_info=Types.SQL_TIMESTAMP())
stamps.print("timestamp")
stamps.map(lambda t: "%s %s" % (type(t).__name__, t.isoformat()), Types.STRING()).print("ts-seen")
env.execute("t12_decimal_temporal")
