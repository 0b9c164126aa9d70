"""The driver: the job master, its checkpoints, sink commits, recovery, reports and client.

May import the runtime packages below it (``operators``, ``task``, ``spark``, ``serving``),
never ``dashboard`` or ``rest``: what is served for a job is started by the function the API
layer hands the job client (``JobClient(master, serve)``).
"""
