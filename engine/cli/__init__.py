"""The `kernelbrain` command line: one module per command group, each with `register`."""

from __future__ import annotations

import argparse
import importlib
import sys

# Command modules, in the order `--help` lists them.
COMMAND_MODULES = ("problems", "doctor", "check", "sessions", "attach", "bench")

EXIT_OK, EXIT_REJECTED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad input from the user; printed without a traceback, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelbrain",
        description="Search for a faster Triton kernel for a PyTorch reference.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"engine.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args) or EXIT_OK
    except UsageError as exc:
        print(f"kernelbrain {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
