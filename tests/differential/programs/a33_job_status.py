"""A program that reads its job's status while the job runs: get_job_status() gives PyFlink's
JobStatus enum (its name, is_globally_terminal_state, is_terminal_state). PyFlink's local
cluster shuts down with the job, so the status is read while the job is RUNNING."""

import time

from pyflink.common import JobStatus, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
(env.from_collection([1, 2, 3], type_info=Types.INT())
    .map(lambda v: time.sleep(1) or v * 10, Types.INT())
    .print("out"))
client = env.execute_async("a33_job_status")
deadline = time.time() + 120
status = None
while time.time() < deadline:
    try:
        status = client.get_job_status().result()
    except Exception:  # PyFlink has no INITIALIZING member: the Java status before CREATED
        status = None
    if status is not None and status.name == "RUNNING":
        break
    time.sleep(0.01)
print("status %s globally terminal %s terminal %s"
      % (status.name, status.is_globally_terminal_state(), status.is_terminal_state()))
print("is RUNNING: %s" % (status == JobStatus.RUNNING))
client.get_job_execution_result().result()
for s in JobStatus:
    print("%s %d %s %s" % (s.name, s.value, s.is_globally_terminal_state(), s.is_terminal_state()))
