"""The `scratchkit` command line: one subcommand per module in `scratchkit.commands`."""
from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in the order `scratchkit --help` lists them.
COMMANDS = ("info", "bench", "verify", "trace", "simulate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scratchkit",
        description="Train, verify, benchmark and simulate embedding caches and ScratchPipe.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"scratchkit.commands.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"scratchkit.commands.{name}":
                continue  # a subcommand not built yet is simply not offered
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv   # `--world-size N` hands them to the ranks (commands/distributed.py)
    try:
        return int(args.run(args) or 0)
    except (ValueError, FileNotFoundError) as err:  # bad input: say what and where, no traceback
        from scratchkit.commands.common import in_cli_words

        print(f"scratchkit {args.command}: error: {in_cli_words(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"scratchkit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
