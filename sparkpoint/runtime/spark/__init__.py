"""The Spark glue on the driver: the session, executors and placement, epochs as Spark jobs.

Imports ``task`` (the function its jobs run), ``operators`` and the runtime's top; never
``driver`` or ``dashboard``.
"""
