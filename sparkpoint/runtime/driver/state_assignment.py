"""Which handles each new subtask restores from, at any new parallelism (rescaling): keyed
handles cut to its key groups, operator (broadcast) state redistributed as Flink does."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.checkpoint.metadata import CheckpointMetadata
from sparkpoint.errors import RestoreError
from sparkpoint.runtime.graph import Node, Plan
from sparkpoint.state.key_groups import (
    KEY_GROUPS_SINCE_FORMAT,
    UNTYPED_KEYS,
    KeyGroupAssigner,
    check_max_parallelism,
    compute_key_group_range_for_operator_index,
    key_group_assigner_of,
)
from sparkpoint.state.key_hash_rules import check_key_hash_rule, rule_of
from sparkpoint.state.operator_repartition import redistribute_operator_state

__all__ = [
    "assign_keyed_state",
    "assign_operator_state",
    "check_unmatched_state",
    "key_hash_rules",
    "node_key_group_assigner",
]


def assign_keyed_state(
    plan: Plan, metadata: CheckpointMetadata | None, explicit_max_parallelism: bool
) -> dict[str, dict[int, list[Any]]]:
    """Per keyed operator and new subtask, the handles cut to the subtask's key groups.

    The max parallelism of the checkpoint is adopted by the plan unless the program set one
    explicitly, in which case both must agree (as Flink requires).
    """
    out: dict[str, dict[int, list[Any]]] = {}
    for stage in plan.stages:
        for node in stage.keyed_nodes:
            op_id = node.operator_id
            per_sub: dict[int, list[Any]] = {i: [] for i in range(stage.parallelism)}
            out[op_id] = per_sub
            op_state = metadata.get_operator_state(op_id) if metadata else None
            if metadata is None or op_state is None:
                continue
            if explicit_max_parallelism or node.max_parallelism is not None:
                check_max_parallelism(
                    op_state.max_parallelism, stage.max_parallelism, f"operator {op_id}"
                )
            stage.max_parallelism = op_state.max_parallelism
            old_handles = [
                h for sub in op_state.subtask_states.values() for h in sub.managed_keyed_state
            ]
            if old_handles:
                _check_key_group_format(metadata, op_id)
                check_key_hash_rule(
                    metadata, op_id, rule_of(node_key_group_assigner(node)), _describe(node)
                )
            for i in range(stage.parallelism):
                rng = compute_key_group_range_for_operator_index(
                    stage.max_parallelism, stage.parallelism, i
                )
                for h in old_handles:
                    cut = h.get_intersection(rng)
                    if cut is not None:
                        per_sub[i].append(cut)
    return out


def node_key_group_assigner(node: Node) -> KeyGroupAssigner:
    """How keyed operator ``node`` places its keys: its keyed input's selector's rule."""
    return key_group_assigner_of(node.inputs[0].key_selector) if node.inputs else UNTYPED_KEYS


def key_hash_rules(plan: Plan) -> dict[str, str]:
    """Keyed operator id -> the rule its keys are placed by (recorded in every snapshot)."""
    return {
        node.operator_id: rule_of(node_key_group_assigner(node))
        for stage in plan.stages
        for node in stage.keyed_nodes
    }


def _describe(node: Node) -> str:
    uid = f"uid {node.uid!r}, " if node.uid else ""
    return f"operator {node.name!r} ({uid}id {node.operator_id})"


def _check_key_group_format(metadata: CheckpointMetadata, op_id: str) -> None:
    """Refuse keyed state whose keys are in other key groups than this release's."""
    version = metadata.format_version
    if version is None or version >= KEY_GROUPS_SINCE_FORMAT:
        return
    raise RestoreError(
        f"Cannot restore the keyed state of operator {op_id} from checkpoint "
        f"{metadata.checkpoint_id}: its _metadata has format version {version}, written "
        "before sparkpoint assigned keys to key groups as PyFlink does (hashCode of "
        "Row.of(key)); restored here, its keys would be looked up in other key groups. "
        "Rewrite it with the state processor: read the state with SavepointReader and "
        "write it with SavepointWriter.with_operator (docs/state-processor.md)."
    )


def assign_operator_state(
    plan: Plan, metadata: CheckpointMetadata | None
) -> dict[str, dict[int, tuple[Any, ...]]]:
    """Per operator with operator (broadcast) state and new subtask, the operator state
    handles it starts from (``redistribute_operator_state``: for broadcast state, new
    subtask ``i`` takes the copy of old subtask ``i % old_parallelism``)."""
    out: dict[str, dict[int, tuple[Any, ...]]] = {}
    if metadata is None:
        return out
    for stage in plan.stages:
        for node in stage.operator_state_nodes:
            op_state = metadata.get_operator_state(node.operator_id)
            if op_state is None:
                continue
            subs = op_state.subtask_states
            old = [
                list(subs[i].managed_operator_state) if i in subs else []
                for i in range(op_state.parallelism)
            ]
            new = redistribute_operator_state(old, stage.parallelism)
            out[node.operator_id] = {i: tuple(hs) for i, hs in enumerate(new) if hs}
    return out


def check_unmatched_state(
    plan: Plan, metadata: CheckpointMetadata, allow_non_restored_state: bool
) -> list[str]:
    """Operator ids with state in the checkpoint but absent from the program.

    Raises ``RestoreError`` unless ``allow_non_restored_state`` (Flink's
    ``execution.savepoint.ignore-unclaimed-state``).
    """
    known = {n.operator_id for n in plan.nodes}
    unmatched = [
        o.operator_id
        for o in metadata.operator_states
        if o.operator_id not in known and _has_state(o.subtask_states.values())
    ]
    if unmatched and not allow_non_restored_state:
        raise RestoreError(
            f"Failed to rollback to checkpoint/savepoint {metadata.checkpoint_id}: cannot map "
            f"state of operators {unmatched} to the new program (no operator with that uid). "
            "Set execution.savepoint.ignore-unclaimed-state=true to skip that state."
        )
    return unmatched


def _has_state(subtasks: Iterable[Any]) -> bool:
    return any(s.managed_keyed_state or s.managed_operator_state for s in subtasks)
