"""The `scratchkit` command line: one subcommand per module in `scratchkit.commands`, each adding
its parser (`add_parser`) and turning what it parsed into a typed request once (request.py)."""

from __future__ import annotations

import argparse
import difflib
import re
import sys

from scratchkit.commands import bench, calibrate, info, simulate, trace, verify
from scratchkit.commands.flags import check_flags

# The subcommands, in the order `scratchkit --help` lists them.
COMMANDS = (info, bench, verify, calibrate, trace, simulate)


def build_parser() -> argparse.ArgumentParser:
    return build_parsers()[0]


def build_parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser, and each subcommand's by name (whose usage a wrong flag shows)."""
    parser = argparse.ArgumentParser(
        prog="scratchkit", description="Train, verify, benchmark and simulate embedding caches and ScratchPipe."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser, subparsers.choices


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments; a flag the subcommand does not know is refused by the subcommand's own
    parser (its usage, not the top level's) with the nearest flag it does know."""
    parser, commands = build_parsers()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = commands[args.command]
        flags = sorted(set(re.findall(r"--[\w-]+", command.format_help())))
        nearest = difflib.get_close_matches(unknown[0], flags, n=1)
        hint = f"; did you mean {nearest[0]}?" if nearest and unknown[0].startswith("-") else ""
        command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    args.argv = argv  # `--world-size N` hands them to the ranks (commands/distributed.py)
    try:
        check_flags(args)  # before the command reads anything
        return int(args.run(args) or 0)
    except (ValueError, OSError) as err:  # bad input, a path not there or not writable: one line
        from scratchkit.commands.common import in_cli_words

        print(f"scratchkit {args.command}: error: {in_cli_words(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"scratchkit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
