"""The ``sparkpoint`` command: list, find and inspect checkpoints, dump savepoints, run the demo.

The entry point is ``sparkpoint.cli.main:main`` (the ``sparkpoint`` console script).
"""

__all__: list[str] = []
