"""Types.ROW_NAMED: field access by name and position, as_dict, nested named rows, key_by."""

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
address = Types.ROW_NAMED(["city", "zip"], [Types.STRING(), Types.INT()])
person = Types.ROW_NAMED(["name", "age", "address"], [Types.STRING(), Types.INT(), address])
data = [("ann", 31, ("Oslo", 150)), ("bob", 25, ("Rome", 100)), ("cy", 31, ("Oslo", 151))]
ds = env.from_collection(data, type_info=person)
ds.print("raw")
ds.map(lambda p: "%s is %d in %s (%s)" % (p.name, p["age"], p.address.city, p[2][1]),
       Types.STRING()).print("by-name")
ds.map(lambda p: str(sorted(p.as_dict(recursive=True).items())), Types.STRING()).print("dict")
(ds.key_by(lambda p: p.age, key_type=Types.INT())
   .reduce(lambda a, b: Row(name=a.name + "+" + b.name, age=a.age, address=b.address))
   .map(lambda p: p, output_type=person)
   .print("reduced"))
ds.map(lambda p: Row(name=p.name.upper(), age=p.age + 1, address=p.address),
       output_type=person).print("typed")
env.execute("t02_row_named")
