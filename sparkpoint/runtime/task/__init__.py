"""The task side: one subtask of one stage for one run of an epoch, on an executor.

The function Spark runs, the operator tree it builds, its keyed state and local
directories, routing between stages and asynchronous uploads. Imports ``operators`` and the
runtime's top; never ``spark``, ``driver`` or ``dashboard`` (it runs on executors).
"""
