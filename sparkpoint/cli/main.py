"""Entry point of the ``sparkpoint`` console command: argument parsing and error reporting.

Bad input (a missing directory, a ``_metadata`` that is not a regular file or too large, a
corrupt or odd one, an incremental checkpoint that cannot be dumped) is printed as one line
on stderr with exit code 2, never as a traceback; an error sparkpoint did not expect is one
line with exit code 3 (``cli.exit_codes``). ``sparkpoint --debug <command> ...`` (an option
before the command, not listed in the help) prints the traceback as well.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Collection, Sequence

from sparkpoint.cli.exit_codes import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED
from sparkpoint.cli.text import one_line, report
from sparkpoint.errors import SparkpointError

__all__ = ["EXIT_ERROR", "build_parser", "main"]

_DEBUG = "--debug"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (``checkpoints``, ``savepoint``, ``list``, ``stop``,
    ``cancel``, ``run``, ``demo``)."""
    return _build_parser()[0]


def _build_parser() -> tuple[argparse.ArgumentParser, frozenset[str]]:
    """The parser, and the names of the ``savepoint`` actions."""
    from sparkpoint.cli import checkpoints, history, jobs, run, savepoints
    from sparkpoint.cli.trust_options import add_trust_arguments

    parser = argparse.ArgumentParser(
        prog="sparkpoint",
        description="Flink-style checkpoints for PySpark streaming jobs: tools.",
    )
    # Not in --help: for bug reports (prints the traceback of an error as well).
    parser.add_argument(_DEBUG, action="store_true", help=argparse.SUPPRESS)
    add_trust_arguments(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    chk = commands.add_parser("checkpoints", help="list, inspect checkpoints, their history")
    chk_commands = chk.add_subparsers(dest="action", metavar="ACTION", required=True)
    checkpoints.add_arguments(chk_commands)
    history.add_arguments(chk_commands)

    sp = commands.add_parser(
        "savepoint", help="take a savepoint of a running job (JOB [DIR]) or work with one"
    )
    sp_commands = sp.add_subparsers(dest="action", metavar="ACTION", required=True)
    savepoints.add_arguments(sp_commands)
    jobs.add_savepoint_trigger(sp_commands)
    savepoint_actions = frozenset(sp_commands.choices)
    jobs.add_arguments(commands)

    run.add_arguments(commands)

    # Listed for --help only: main() hands everything after "demo" to the demo's own parser.
    commands.add_parser(
        "demo",
        help="run the fault-tolerant demo job on local Spark (sparkpoint demo --help)",
        add_help=False,
    )
    return parser, savepoint_actions


def _run_demo(argv: list[str]) -> int:
    """Dispatch to ``sparkpoint.demo.main`` (imported lazily: it needs PySpark)."""
    from sparkpoint.demo import main as demo_main

    return int(demo_main(argv))


def _savepoint_of_job(arguments: list[str], actions: Collection[str]) -> list[str]:
    """``savepoint JOB [DIR]`` (Flink's ``flink savepoint``) as ``savepoint trigger JOB
    [DIR]``; ``savepoint dump ...`` and the other ``actions`` stay as they are."""
    if "savepoint" not in arguments:
        return arguments
    at = arguments.index("savepoint") + 1
    if at < len(arguments) and not arguments[at].startswith("-") and arguments[at] not in actions:
        return [*arguments[:at], "trigger", *arguments[at:]]
    return arguments


def _message(exc: BaseException) -> str:
    return one_line(exc) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["demo"] or arguments[:2] == [_DEBUG, "demo"]:
        return _run_demo(arguments[arguments.index("demo") + 1 :])
    parser, savepoint_actions = _build_parser()
    args = parser.parse_args(_savepoint_of_job(arguments, savepoint_actions))
    debug = bool(args.debug)
    try:
        from sparkpoint.cli.trust_options import apply_trust_arguments

        apply_trust_arguments(args)
        return int(args.handler(args))
    except (SparkpointError, OSError, ValueError) as exc:
        # MetadataFormatError, StorageError, RestoreError, FileNotFoundError, bad pointers.
        if debug:
            traceback.print_exc()
        report(f"error: {_message(exc)}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        report("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            traceback.print_exc()
        report(
            f"internal error: {type(exc).__name__}: {_message(exc)} (not expected: run "
            f"'sparkpoint {_DEBUG} ...' for the traceback and report it)"
        )
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
