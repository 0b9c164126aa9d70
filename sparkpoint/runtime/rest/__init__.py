"""The job's server: Flink's REST API for the running job (list, stop with a savepoint,
cancel, savepoints) and the dashboard on one bounded server, ``/metrics`` on the
Prometheus reporter's port; the file that tells the ``sparkpoint`` command where a job is
served and its token.

May import ``serving``, ``driver`` and ``dashboard``; nothing below imports it (the API
layer hands ``job_server.serve_job`` to the job client).
"""
