"""The `scratchkit` command line (`cli.py`), one module per subcommand, each with
`add_parser(subparsers)` and `run(args) -> int`; the only place that parses arguments or lays out
text tables (`tables.py`)."""
