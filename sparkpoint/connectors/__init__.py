"""Sources and sinks: replayable sources (splits and positions) and two-phase-commit sinks.

Also Spark's streaming DataFrames in (``spark_source``) and Spark's batch writers out
(``spark_writer``); only those two import PySpark.
"""
