"""Checkpoint storage, spelled as PyFlink's ``pyflink.datastream.checkpoint_storage``.

``JobManagerCheckpointStorage`` keeps checkpoints in the driver's memory (small state,
development); ``FileSystemCheckpointStorage`` writes them to a file system or object store
(production); ``CustomCheckpointStorage`` wraps your own implementation of
``CheckpointStorage``. These are the engine's classes, re-exported under PyFlink's names.
"""

from sparkpoint.checkpoint.custom_storage import CustomCheckpointStorage
from sparkpoint.checkpoint.storage import CheckpointStorage
from sparkpoint.checkpoint.storage_policies import (
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)

__all__ = [
    "CheckpointStorage",
    "CustomCheckpointStorage",
    "FileSystemCheckpointStorage",
    "JobManagerCheckpointStorage",
]
