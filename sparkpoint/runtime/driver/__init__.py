"""The driver: the job master, its checkpoints, sink commits, recovery, reports and client.

May import every other runtime package but ``dashboard``'s internals (the client starts
the dashboard through its public entry).
"""
