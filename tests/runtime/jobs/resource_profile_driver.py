"""A job whose source stage's operators are in a slot sharing group of 2 CPU cores, run on
the master given, in its own driver process (one SparkContext per process).

Usage: ``resource_profile_driver.py <master>``. Prints ``RESULT {...}``: every record's
task CPUs in the grouped stage and in the next (ungrouped, keyed) stage, as Spark's
``TaskContext.cpus()`` saw them.
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

N = 40


def main() -> None:
    master = sys.argv[1]
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    from sparkpoint.runtime.spark.session import get_spark_session
    from tests.runtime.jobs.resource_jobs import cpus_job

    spark = get_spark_session(master)
    rows = cpus_job(spark, N)
    print("RESULT " + json.dumps({"rows": rows}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
