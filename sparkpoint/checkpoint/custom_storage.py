"""CustomCheckpointStorage: a user's own CheckpointStorage implementation, wrapped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkpoint.checkpoint.storage import (
    CheckpointStorage,
    CheckpointStorageAccess,
    CompletedCheckpointStorageLocation,
)

__all__ = ["CustomCheckpointStorage"]


class CustomCheckpointStorage(CheckpointStorage):
    """Wraps a user's own ``CheckpointStorage`` implementation and delegates to it."""

    def __init__(self, user_storage: CheckpointStorage) -> None:
        if isinstance(user_storage, CustomCheckpointStorage):
            user_storage = user_storage.user_storage
        required = ("create_checkpoint_storage", "resolve_checkpoint")
        if not all(callable(getattr(user_storage, name, None)) for name in required):
            raise TypeError(f"{user_storage!r} is not an instance of CheckpointStorage.")
        self.user_storage: Any = user_storage

    def configure(self, config: Mapping[str, Any]) -> CustomCheckpointStorage:
        configure = getattr(self.user_storage, "configure", None)
        if not callable(configure):
            return self
        configured = configure(config)
        return self if configured is self.user_storage else CustomCheckpointStorage(configured)

    def create_checkpoint_storage(self, job_id: str) -> CheckpointStorageAccess:
        return self.user_storage.create_checkpoint_storage(job_id)

    def resolve_checkpoint(self, pointer: str) -> CompletedCheckpointStorageLocation:
        return self.user_storage.resolve_checkpoint(pointer)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CustomCheckpointStorage) and other.user_storage == self.user_storage
        )

    def __hash__(self) -> int:
        return hash(("custom", id(self.user_storage)))

    def __str__(self) -> str:
        return f"CustomCheckpointStorage({self.user_storage})"
