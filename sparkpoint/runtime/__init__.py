"""The runtime: how a job's plan runs on Spark, grouped by role.

At the top stay only what every side shares: the plan (``graph``) and the messages between
the driver and the tasks (``protocol``). The sub-packages, from the bottom up:

- ``operators``: what runs inside a task on records (chained operators, windows, contexts);
- ``task``: one subtask of one stage on an executor (keyed state, routing, uploads);
- ``spark``: the Spark glue on the driver (the session, epochs as Spark jobs, executors);
- ``serving``: the bounded HTTP server the driver's servers share (no job knowledge);
- ``driver``: the job master and what it owns (checkpoints, recovery, reports, the client);
- ``dashboard``: the read-only web page of a running job;
- ``rest``: the job's server (Flink's REST API and the dashboard on one server, ``/metrics``).

A package imports only the top and the packages listed above it; ``operators`` and ``task``
never import ``spark``, ``driver``, ``dashboard`` or ``rest``, and ``driver`` never imports
``dashboard`` or ``rest`` (the API layer hands the client ``rest.job_server.serve_job``;
``tests/test_layering.py`` checks it).
"""
