"""Every public name of PyFlink 2.3's ``pyflink.datastream``, ``pyflink.datastream.formats.*``
and ``pyflink.common`` exists in sparkpoint under the same module path, and every class has
PyFlink's public attributes, except the names in ABSENT, each with why. The names were
recorded from PyFlink itself (scripts/record_pyflink_names.py -> pyflink_names.json).
Extra names in sparkpoint are allowed, as in PyFlink's own completeness tests."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

RECORDED = json.loads((Path(__file__).parent / "pyflink_names.json").read_text("utf-8"))

_FILE_FORMATS = (
    "a file format of Flink's file connector built on Java bulk writers/input formats "
    "(sparkpoint's FileSource/FileSink have their own formats); the row (de)serialization "
    "schemas of the module are provided"
)
_NO_JVM = "returns the wrapped Java object: sparkpoint runs no JVM"

# module -> names deliberately absent, with the reason (a whole module: "*")
ABSENT: dict[str, dict[str, str]] = {
    "pyflink.datastream.formats.avro": {
        "AvroBulkWriters": _FILE_FORMATS,
        "AvroInputFormat": _FILE_FORMATS,
        "AvroSchema": _FILE_FORMATS + " (it wraps Java's org.apache.avro.Schema)",
        "GenericRecordAvroTypeInfo": _FILE_FORMATS + " (Java GenericRecord values)",
    },
    "pyflink.datastream.formats.csv": {
        "CsvBulkWriters": _FILE_FORMATS,
        "CsvReaderFormat": _FILE_FORMATS,
    },
    "pyflink.datastream.formats.orc": {"*": _FILE_FORMATS + " (ORC: Table API row types)"},
    "pyflink.datastream.formats.parquet": {"*": _FILE_FORMATS + " (Parquet: Table API row types)"},
    "pyflink.common": {
        "AssignerWithPeriodicWatermarksWrapper": "wraps a Java watermark assigner",
        "TypeSerializer": (
            "PyFlink's base class of its Beam coders' serializers (serialize(element, stream)); "
            "sparkpoint's serializers (sparkpoint.state.serializers.TypeSerializer) have another "
            "contract, so the name would mislead"
        ),
    },
}
# class (module.Class) -> attributes deliberately absent, with the reason
ABSENT_MEMBERS: dict[str, dict[str, str]] = {
    "pyflink.datastream.OutputTag": {"get_java_output_tag": _NO_JVM},
    "pyflink.datastream.SinkFunction": {"get_java_function": _NO_JVM},
    "pyflink.datastream.SourceFunction": {"get_java_function": _NO_JVM},
    "pyflink.common.TypeInformation": {
        "get_java_type_info": _NO_JVM,
        "need_conversion": "the Table API's internal value conversion (no Table API)",
        "to_internal_type": "the Table API's internal value conversion (no Table API)",
        "from_internal_type": "the Table API's internal value conversion (no Table API)",
    },
}


def _sparkpoint(module: str) -> Any:
    return importlib.import_module("sparkpoint" + module.removeprefix("pyflink"))


def test_the_recording_is_pyflink_2_3() -> None:
    assert RECORDED["apache-flink"] == "2.3.0"
    assert len(RECORDED["modules"]["pyflink.datastream"]) >= 58
    assert len(RECORDED["modules"]["pyflink.common"]) >= 27


@pytest.mark.parametrize("module", sorted(RECORDED["modules"]))
def test_every_public_name_exists(module: str) -> None:
    absent = ABSENT.get(module, {})
    if "*" in absent:
        with pytest.raises(ImportError):
            _sparkpoint(module)
        return
    ours = _sparkpoint(module)
    missing = [n for n in RECORDED["modules"][module] if not hasattr(ours, n) and n not in absent]
    assert missing == [], f"{module}: missing {missing}"
    present = [n for n in absent if hasattr(ours, n)]
    assert present == [], f"{module}: allow-listed but present now (drop them from ABSENT)"


@pytest.mark.parametrize("cls", sorted(RECORDED["members"]))
def test_every_class_has_pyflinks_public_attributes(cls: str) -> None:
    module, name = cls.rsplit(".", 1)
    if "*" in ABSENT.get(module, {}) or name in ABSENT.get(module, {}):
        return
    ours = getattr(_sparkpoint(module), name)
    absent = ABSENT_MEMBERS.get(cls, {})
    missing = [a for a in RECORDED["members"][cls] if not hasattr(ours, a) and a not in absent]
    assert missing == [], f"{cls}: missing {missing}"
    present = [a for a in absent if hasattr(ours, a)]
    assert present == [], f"{cls}: allow-listed but present now (drop them from ABSENT_MEMBERS)"
