"""Types.PICKLED_BYTE_ARRAY (and no declared type): any Python object round-trips; print()
shows str(value), and str/bytes values as themselves."""

import datetime
import decimal
import fractions

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
objects = [{"b": 2, "a": [1, (2, 3)]}, frozenset({3}), fractions.Fraction(3, 4),
           decimal.Decimal("1.10"), datetime.date(2024, 2, 29), (), "text", 2.5, 1e-05,
           True]
# from_collection hands records to Java first, which cannot take every Python object.
ds = env.from_collection(list(range(len(objects))), type_info=Types.INT()).map(
    lambda i: objects[i], output_type=Types.PICKLED_BYTE_ARRAY())
ds.print("pickled")
ds.map(lambda o: "%s %r" % (type(o).__name__, o), Types.STRING()).print("type")
(ds.key_by(lambda o: type(o).__name__)
   .map(lambda o: o)
   .print("keyed"))
env.execute("t07_pickled_byte_array")
