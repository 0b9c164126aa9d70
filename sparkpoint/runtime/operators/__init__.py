"""Operators: what runs on records inside one Spark task, batch at a time.

Chained operators, two-input and broadcast operators, async I/O, windows and their state,
and the contexts user functions see. Imports the runtime's top (plan, protocol) only; never
``task``, ``spark``, ``driver`` or ``dashboard``.
"""
