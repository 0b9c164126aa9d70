"""Checkpoint storage and its formats: Flink's ``runtime/state`` and ``runtime/checkpoint``.

Storage policies and per-job access, stream factories, state handles, the ``_metadata``
format, the completed-checkpoint store, the shared-state registry and the cleaner. Imports
``fs``, ``config`` and the bottom modules only; never PySpark, ``state`` or ``runtime``.
"""
