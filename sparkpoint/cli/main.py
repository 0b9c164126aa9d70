"""Entry point of the ``sparkpoint`` console command: argument parsing and error reporting.

Expected problems (a missing directory, a corrupt ``_metadata``, an incremental checkpoint
that cannot be dumped) are printed as one line on stderr with exit code 2, never as a
traceback. Each subcommand returns its own exit code (0 success, 1 "nothing found").
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sparkpoint.errors import SparkpointError

__all__ = ["EXIT_ERROR", "build_parser", "main"]

EXIT_ERROR = 2
"""Exit code for bad input: missing paths, corrupt metadata, unreadable state."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (``checkpoints``, ``savepoint``, ``demo``)."""
    from sparkpoint.cli import checkpoints, history, savepoints
    from sparkpoint.cli.trust_options import add_trust_arguments

    parser = argparse.ArgumentParser(
        prog="sparkpoint",
        description="Flink-style checkpoints for PySpark streaming jobs: tools.",
    )
    add_trust_arguments(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    chk = commands.add_parser("checkpoints", help="list, inspect checkpoints, their history")
    chk_commands = chk.add_subparsers(dest="action", metavar="ACTION", required=True)
    checkpoints.add_arguments(chk_commands)
    history.add_arguments(chk_commands)

    sp = commands.add_parser("savepoint", help="work with savepoints")
    sp_commands = sp.add_subparsers(dest="action", metavar="ACTION", required=True)
    savepoints.add_arguments(sp_commands)

    # Listed for --help only: main() hands everything after "demo" to the demo's own parser.
    commands.add_parser(
        "demo",
        help="run the fault-tolerant demo job on local Spark (sparkpoint demo --help)",
        add_help=False,
    )
    return parser


def _run_demo(argv: list[str]) -> int:
    """Dispatch to ``sparkpoint.demo.main`` (imported lazily: it needs PySpark)."""
    from sparkpoint.demo import main as demo_main

    return int(demo_main(argv))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["demo"]:
        return _run_demo(arguments[1:])
    args = build_parser().parse_args(arguments)
    try:
        from sparkpoint.cli.trust_options import apply_trust_arguments

        apply_trust_arguments(args)
        return int(args.handler(args))
    except (SparkpointError, OSError, ValueError) as exc:
        # MetadataFormatError, StorageError, RestoreError, FileNotFoundError, bad pointers.
        print(f"sparkpoint: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("sparkpoint: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
