"""Checkpoint storage and its formats: Flink's ``runtime/state`` and ``runtime/checkpoint``.

Storage policies and per-job access, stream factories, state handles, the ``_metadata``
file (``metadata/``), the completed-checkpoint store, the shared-state registry, the cleaner
and the discovery of checkpoint directories. Imports ``fs``, ``config`` and the bottom
modules only; never PySpark, ``state`` or ``runtime``.
"""
