"""The ``_metadata`` file of a checkpoint or savepoint: Flink's ``runtime/checkpoint/metadata``.

``CheckpointMetadata`` and the operator, subtask and master states it holds (re-exported
here, the package's public face); ``file_format`` frames, stores and loads the file;
``serializers`` registers one payload serializer per format version (``v1``, ``v2``), which
share ``serializer_base`` (the handle codec), ``serializer`` (the contract, type tags and
errors) and ``payload_io`` (big-endian primitives). Imports ``checkpoint``, ``fs`` and the
bottom modules only.
"""

from sparkpoint.checkpoint.metadata.checkpoint_metadata import (
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)

__all__ = ["CheckpointMetadata", "MasterState", "OperatorState", "OperatorSubtaskState"]
