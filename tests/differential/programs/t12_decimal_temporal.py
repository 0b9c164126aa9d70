"""BIG_DEC, SQL_DATE, SQL_TIME and SQL_TIMESTAMP typed records: what Python receives and how
print() spells them (Java's toString)."""

import datetime
import decimal

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
source = env.from_collection([0, 1, 2], type_info=Types.INT())
decimals = [decimal.Decimal("1.10"), decimal.Decimal("-0.000001"),
            decimal.Decimal("12345678901234567890.5")]
decs = source.map(lambda i: decimals[i], output_type=Types.BIG_DEC())
decs.print("decimal")
decs.map(lambda d: "%s %s" % (type(d).__name__, d), Types.STRING()).print("decimal-seen")
dates = source.map(lambda i: datetime.date(2024, 2, 29) - datetime.timedelta(days=20000 * i),
                   output_type=Types.SQL_DATE())
dates.print("date")
dates.map(lambda d: "%s %s" % (type(d).__name__, d.isoformat()), Types.STRING()).print("date-seen")
source.map(lambda i: datetime.time(13, 5 * i, 7, 250000 * i),
           output_type=Types.SQL_TIME()).print("time")
stamps = source.map(lambda i: datetime.datetime(2024, 1, 2, 3, 4, 5, 123000 * i),
                    output_type=Types.SQL_TIMESTAMP())
stamps.print("timestamp")
stamps.map(lambda t: "%s %s" % (type(t).__name__, t.isoformat()), Types.STRING()).print("ts-seen")
env.execute("t12_decimal_temporal")
