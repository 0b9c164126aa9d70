"""Jobs and driver processes the runtime and connector tests run, not tests themselves.

Spark's Python workers import these modules by name (user functions are pickled by
reference), and the ``*_driver.py`` / ``driver_job.py`` scripts run as their own driver
processes (``python tests/runtime/jobs/<script>.py``). ``reference.py`` holds the keyed-count
and two-input jobs most runtime tests share.
"""
