"""Record the public names of PyFlink 2.3's ``pyflink.datastream``, ``pyflink.datastream.
formats.*`` and ``pyflink.common`` (each module's ``__all__``) and the public attributes of
every class they export, for tests/api/test_pyflink_names.py.

Runs the PyFlink venv's Python (imports only: no JVM starts) and writes
tests/api/pyflink_names.json.

    python scripts/record_pyflink_names.py
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "api" / "pyflink_names.json"
VENV = Path(os.environ.get("SPARKPOINT_PYFLINK_VENV", "~/.cache/sparkpoint/pyflink-venv"))
MODULES = [
    "pyflink.datastream",
    "pyflink.datastream.formats.avro",
    "pyflink.datastream.formats.csv",
    "pyflink.datastream.formats.json",
    "pyflink.datastream.formats.orc",
    "pyflink.datastream.formats.parquet",
    "pyflink.common",
]

PROBE = """
import importlib, inspect, json, sys
from importlib.metadata import version
modules, members = {}, {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    names = sorted(getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]))
    modules[name] = names
    for n in names:
        obj = getattr(module, n)
        if inspect.isclass(obj):
            members[f"{name}.{n}"] = sorted(a for a in dir(obj) if not a.startswith("_"))
print(json.dumps({"apache-flink": version("apache-flink"), "modules": modules,
                  "members": members}, indent=1, sort_keys=True))
"""


def main() -> None:
    python = VENV.expanduser() / "bin" / "python"
    out = subprocess.run(
        [str(python), "-c", PROBE, *MODULES], capture_output=True, text=True, check=True
    ).stdout
    OUT.write_text(out, encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
