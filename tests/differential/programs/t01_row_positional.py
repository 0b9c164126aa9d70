"""Types.ROW records: Row objects with positional access, printed as +I[...]; None fields."""

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
row = Types.ROW([Types.INT(), Types.STRING(), Types.BOOLEAN()])
ds = env.from_collection([(1, "one", True), (2, None, False), (3, "three", None)], type_info=row)
ds.print("as-declared")
ds.map(lambda r: "%s %s len=%d first=%r last=%r" % (type(r).__name__, r.get_row_kind(), len(r),
                                                    r[0], r[-1]), Types.STRING()).print("seen")
ds.map(lambda r: Row(r[0] * 10, (r[1] or "-").upper(), not r[2]), output_type=row).print("mapped")
ds.map(lambda r: (r[0], r[1])).print("as-tuple")
env.execute("t01_row_positional")
