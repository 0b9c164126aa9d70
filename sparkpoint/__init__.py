"""sparkpoint: Flink's checkpointing system behind PyFlink's API, for streaming jobs on Spark.

A PyFlink DataStream program runs here with the import prefix ``pyflink`` changed to
``sparkpoint``; README.md and docs/README.md say where to start.
"""
