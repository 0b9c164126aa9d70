"""The runtime: how a job's plan runs on Spark, grouped by role.

At the top stay only what every side shares: the plan (``graph``) and the messages between
the driver and the tasks (``protocol``). The sub-packages, from the bottom up:

- ``operators``: what runs inside a task on records (chained operators, windows, contexts);
- ``task``: one subtask of one stage on an executor (keyed state, routing, uploads);
- ``spark``: the Spark glue on the driver (the session, epochs as Spark jobs, executors);
- ``driver``: the job master and what it owns (checkpoints, recovery, reports, the client);
- ``dashboard``: the read-only web page of a running job.

A package imports only the top and the packages listed above it; ``operators`` and ``task``
never import ``spark``, ``driver`` or ``dashboard`` (``tests/test_layering.py`` checks it).
"""
