"""Which rule placed each keyed operator's keys in key groups, recorded in ``_metadata``.

Since keys with a declared type (``key_by(..., key_type=Types.LONG())``) hash as that Java
type (``KeyGroupAssigner``), a LONG, FLOAT, DOUBLE or BOOLEAN key can sit in another key
group than the value rule puts it in. Every snapshot therefore records, per keyed operator,
the rule its keys were placed by (the master state ``sparkpoint.key-hash``: operator id ->
``value`` or the declared type's name). A snapshot without the record was written before
the typed rule: every operator in it used the value rule. A restore whose program places
keys by another rule than the recorded one is refused, naming the operator: restored, its
keys would be looked up in the wrong key groups.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkpoint.checkpoint.metadata import CheckpointMetadata, MasterState
from sparkpoint.errors import MetadataFormatError, RestoreError
from sparkpoint.state.key_groups import KeyGroupAssigner

__all__ = [
    "KEY_HASH_MASTER_STATE",
    "VALUE_RULE",
    "check_key_hash_rule",
    "key_hash_master_state",
    "recorded_key_hash_rules",
    "rule_of",
]

KEY_HASH_MASTER_STATE = "sparkpoint.key-hash"
VALUE_RULE = "value"
"""Keys hashed by their value (no declared type, or one whose Java hash equals it); also
the rule of every operator of a snapshot written before the record existed."""
_RULES = frozenset({VALUE_RULE, "LONG", "FLOAT", "DOUBLE", "BOOLEAN"})


def rule_of(assigner: KeyGroupAssigner) -> str:
    """The recorded name of ``assigner``'s rule."""
    return assigner.type_name or VALUE_RULE


def key_hash_master_state(rules: Mapping[str, str]) -> MasterState:
    """The master state recording ``rules`` (operator id -> rule)."""
    return MasterState.from_json(KEY_HASH_MASTER_STATE, {"operators": dict(rules)})


def recorded_key_hash_rules(metadata: CheckpointMetadata) -> dict[str, str] | None:
    """Operator id -> rule as ``metadata`` records them; None when it has no record (written
    before the typed rule: every operator used the value rule). A malformed record (the
    snapshot is input from outside) raises ``MetadataFormatError``."""
    found = metadata.get_master_state(KEY_HASH_MASTER_STATE)
    if found is None:
        return None
    try:
        data = found.to_json()
    except ValueError as e:
        raise MetadataFormatError(f"Master state {KEY_HASH_MASTER_STATE} is not JSON: {e}") from e
    operators = data.get("operators") if isinstance(data, dict) else None
    if not isinstance(operators, dict):
        raise MetadataFormatError(
            f"Master state {KEY_HASH_MASTER_STATE} has no 'operators' mapping: {data!r:.200}"
        )
    for op, rule in operators.items():
        if rule not in _RULES:
            raise MetadataFormatError(
                f"Master state {KEY_HASH_MASTER_STATE}: operator {op!r} has the unknown key "
                f"hash rule {rule!r:.100} (known: {', '.join(sorted(_RULES))})"
            )
    return dict(operators)


def check_key_hash_rule(
    metadata: CheckpointMetadata, operator_id: str, rule: str, operator: str | None = None
) -> None:
    """Refuse (``RestoreError``) to restore ``operator_id``'s keyed state with ``rule`` when
    ``metadata`` records another rule for it (no record: the value rule)."""
    recorded = (recorded_key_hash_rules(metadata) or {}).get(operator_id, VALUE_RULE)
    if recorded == rule:
        return
    legacy = metadata.get_master_state(KEY_HASH_MASTER_STATE) is None

    def describe(r: str) -> str:
        return "by the key's value" if r == VALUE_RULE else f"as Java {r} keys"

    raise RestoreError(
        f"Cannot restore the keyed state of {operator or f'operator {operator_id}'} from "
        f"checkpoint {metadata.checkpoint_id}: its keys were placed in key groups "
        f"{describe(recorded)}"
        f"{' (written before the key hash rule was recorded)' if legacy else ''}, and the "
        f"program places them {describe(rule)}; restored, keys would be looked up in the "
        "wrong key groups. Declare the key type the snapshot was written with in key_by "
        "(none for the value rule), or rewrite the state with the state processor "
        "(SavepointReader, then SavepointWriter.with_operator with the key type; "
        "docs/state-processor.md)."
    )
