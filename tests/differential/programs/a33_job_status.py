"""A program that reads its job's status: get_job_status() gives PyFlink's JobStatus enum
(its name, is_globally_terminal_state, is_terminal_state) once the job has finished."""

from pyflink.common import JobStatus, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
(env.from_collection([1, 2, 3], type_info=Types.INT())
    .map(lambda v: v * 10, Types.INT())
    .print("out"))
client = env.execute_async("a33_job_status")
client.get_job_execution_result().result()
status = client.get_job_status().result()
print("status %s globally terminal %s terminal %s"
      % (status.name, status.is_globally_terminal_state(), status.is_terminal_state()))
print("is FINISHED: %s" % (status == JobStatus.FINISHED))
for s in JobStatus:
    print("%s %d %s %s" % (s.name, s.value, s.is_globally_terminal_state(), s.is_terminal_state()))
