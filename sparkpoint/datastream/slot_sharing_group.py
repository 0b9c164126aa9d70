"""``pyflink.datastream.slot_sharing_group``: ``SlotSharingGroup`` (a name and, optionally, the
resources each slot of the group needs) and ``MemorySize``.

sparkpoint has no slots: an operator's group and its resources are recorded on the operator
(``get_execution_plan`` shows them), and its stage's Spark tasks ask for the group's CPU
cores through stage-level scheduling's ``ResourceProfile`` where Spark's master has it
(``runtime/spark/resource_profiles.py``); elsewhere they are accepted without effect. See
docs/architecture.md, "Limitations".
"""

from __future__ import annotations

from typing import Any

__all__ = ["MemorySize", "SlotSharingGroup"]

_UNITS = ((1 << 40, "tb"), (1 << 30, "gb"), (1 << 20, "mb"), (1 << 10, "kb"))


class MemorySize:
    """A number of bytes, as Flink's ``MemorySize``."""

    def __init__(self, j_memory_size: Any = None, bytes_size: int | None = None) -> None:
        size = bytes_size if bytes_size is not None else j_memory_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"bytes must be >= 0, got {size!r}")
        self._bytes = size

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> MemorySize:
        """``mebi_bytes`` MiB."""
        return MemorySize(bytes_size=mebi_bytes << 20)

    def get_bytes(self) -> int:
        """The size in bytes."""
        return self._bytes

    def get_kibi_bytes(self) -> int:
        """The size in KiB (rounded down)."""
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        """The size in MiB (rounded down)."""
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        """The size in GiB (rounded down)."""
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        """The size in TiB (rounded down)."""
        return self._bytes >> 40

    def get_java_memory_size(self) -> Any:
        """Not available: sparkpoint has no JVM objects."""
        raise NotImplementedError("sparkpoint has no Java MemorySize; use get_bytes()")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemorySize) and self._bytes == other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __lt__(self, other: MemorySize) -> bool:
        if not isinstance(other, MemorySize):
            raise TypeError(f"Does not support comparison with non-MemorySize {other}")
        return self._bytes < other._bytes

    def __le__(self, other: MemorySize) -> bool:
        return self == other or self < other

    def __str__(self) -> str:
        for size, unit in _UNITS:
            if self._bytes and self._bytes % size == 0:
                return f"{self._bytes // size} {unit}"
        return f"{self._bytes} bytes"

    __repr__ = __str__


class SlotSharingGroup:
    """A slot sharing group's name and resource spec; build one with ``builder(name)``."""

    def __init__(
        self,
        name: str,
        cpu_cores: float | None = None,
        task_heap_memory: MemorySize | None = None,
        task_off_heap_memory: MemorySize | None = None,
        managed_memory: MemorySize | None = None,
        external_resources: dict[str, float] | None = None,
    ) -> None:
        self._name = name
        self._cpu_cores = cpu_cores
        self._task_heap_memory = task_heap_memory
        self._task_off_heap_memory = task_off_heap_memory
        self._managed_memory = managed_memory
        self._external_resources = dict(external_resources or {})

    def get_name(self) -> str:
        """The group's name."""
        return self._name

    def get_managed_memory(self) -> MemorySize | None:
        """The managed memory of the group's slots (None: unspecified)."""
        return self._managed_memory

    def get_task_heap_memory(self) -> MemorySize | None:
        """The task heap memory of the group's slots (None: unspecified)."""
        return self._task_heap_memory

    def get_task_off_heap_memory(self) -> MemorySize | None:
        """The task off-heap memory of the group's slots (None: unspecified)."""
        return self._task_off_heap_memory

    def get_cpu_cores(self) -> float | None:
        """The CPU cores of the group's slots (None: unspecified)."""
        return self._cpu_cores

    def get_external_resources(self) -> dict[str, float]:
        """Other resources by name (GPUs, ...)."""
        return dict(self._external_resources)

    def get_java_slot_sharing_group(self) -> Any:
        """Not available: sparkpoint has no JVM objects."""
        raise NotImplementedError("sparkpoint has no Java SlotSharingGroup")

    def resources(self) -> dict[str, Any]:
        """The resource spec as plain values (what the execution plan shows); empty when
        unspecified."""
        out: dict[str, Any] = {}
        if self._cpu_cores is not None:
            out["cpu_cores"] = self._cpu_cores
        for key, size in (
            ("task_heap_memory_bytes", self._task_heap_memory),
            ("task_off_heap_memory_bytes", self._task_off_heap_memory),
            ("managed_memory_bytes", self._managed_memory),
        ):
            if size is not None:
                out[key] = size.get_bytes()
        if self._external_resources:
            out["external_resources"] = dict(self._external_resources)
        return out

    @staticmethod
    def builder(name: str) -> SlotSharingGroup.Builder:
        """A builder of the group ``name``."""
        return SlotSharingGroup.Builder(name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SlotSharingGroup)
            and self._name == other._name
            and self.resources() == other.resources()
        )

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f"SlotSharingGroup(name={self._name!r}, {self.resources()})"

    class Builder:
        """Sets a slot sharing group's resources (Flink's ``SlotSharingGroup.Builder``)."""

        def __init__(self, name: str) -> None:
            if not isinstance(name, str) or not name:
                raise ValueError(f"The name of a slot sharing group must be a string, got {name!r}")
            self._name = name
            self._values: dict[str, Any] = {}
            self._external: dict[str, float] = {}

        def set_cpu_cores(self, cpu_cores: float) -> SlotSharingGroup.Builder:
            """The CPU cores of each slot (positive)."""
            if not cpu_cores > 0:
                raise ValueError(f"The cpu cores should be positive, got {cpu_cores}")
            self._values["cpu_cores"] = float(cpu_cores)
            return self

        def _memory(self, key: str, size: MemorySize) -> SlotSharingGroup.Builder:
            if not isinstance(size, MemorySize):
                raise TypeError(f"{key} must be a MemorySize, got {size!r}")
            if key != "managed_memory" and size.get_bytes() == 0:
                raise ValueError(f"The {key.replace('_', ' ')} should be positive")
            self._values[key] = size
            return self

        def set_task_heap_memory(self, task_heap_memory: MemorySize) -> SlotSharingGroup.Builder:
            """The task heap memory of each slot (positive)."""
            return self._memory("task_heap_memory", task_heap_memory)

        def set_task_heap_memory_mb(self, task_heap_memory_mb: int) -> SlotSharingGroup.Builder:
            """The task heap memory of each slot, in MiB."""
            return self._memory("task_heap_memory", MemorySize.of_mebi_bytes(task_heap_memory_mb))

        def set_task_off_heap_memory(
            self, task_off_heap_memory: MemorySize
        ) -> SlotSharingGroup.Builder:
            """The task off-heap memory of each slot."""
            return self._memory("task_off_heap_memory", task_off_heap_memory)

        def set_task_off_heap_memory_mb(
            self, task_off_heap_memory_mb: int
        ) -> SlotSharingGroup.Builder:
            """The task off-heap memory of each slot, in MiB."""
            size = MemorySize.of_mebi_bytes(task_off_heap_memory_mb)
            return self._memory("task_off_heap_memory", size)

        def set_managed_memory(self, managed_memory: MemorySize) -> SlotSharingGroup.Builder:
            """The managed memory of each slot."""
            return self._memory("managed_memory", managed_memory)

        def set_managed_memory_mb(self, managed_memory_mb: int) -> SlotSharingGroup.Builder:
            """The managed memory of each slot, in MiB."""
            return self._memory("managed_memory", MemorySize.of_mebi_bytes(managed_memory_mb))

        def set_external_resource(self, name: str, value: float) -> SlotSharingGroup.Builder:
            """An amount of another resource (a GPU, ...)."""
            self._external[name] = float(value)
            return self

        def build(self) -> SlotSharingGroup:
            """The group: CPU cores and task heap memory are both required once any resource
            is set (Flink's rule)."""
            values = self._values
            if (values or self._external) and (
                "cpu_cores" not in values or "task_heap_memory" not in values
            ):
                raise ValueError(
                    "The cpu cores and task heap memory are required when specifying the "
                    "resource of a slot sharing group. You need to explicitly configure them "
                    "with positive value."
                )
            return SlotSharingGroup(self._name, external_resources=self._external, **values)
