"""The `kernelbrain` command line: one module per command group, each with `register`."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback

from engine.errors import KernelBrainError

# Command modules, in the order `--help` lists them.
COMMAND_MODULES = (
    "problems",
    "doctor",
    "check",
    "sessions",
    "session_views",
    "control",
    "attach",
    "bench",
)
# Commands whose modules import torch as they load: `--help` lists them with this text, and a
# module is loaded only when its command runs, so the session-file commands start in a blink.
DEFERRED_COMMANDS = {
    "doctor": "report GPU, versions, ncu, backend and isolation",
    "check": "run the policy gate on one candidate",
}

# A value below zero (`--budget -5evals`, `budget S -1m`) starts like an option, which argparse
# refuses with "expected one argument"; a leading space makes it a value, so that the command
# says what is wrong with it (int() and float() read it as it is).
NEGATIVE_VALUE = re.compile(r"^-[\d.$]")

EXIT_OK, EXIT_REJECTED, EXIT_USAGE = 0, 1, 2
EXIT_FAILED = 1  # the command could not do its work (a folder it cannot write)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader (`| head`) went away
EXIT_BUG = 70  # EX_SOFTWARE (sysexits.h): an internal error, shown with its traceback
BUG_REPORT = (
    "kernelbrain: this is a bug in KernelBrain, not in what you gave it: please report it to "
    "KernelBrain's issue tracker with the traceback above and the command you ran"
)


class UsageError(KernelBrainError):
    """Bad input from the user; printed without a traceback, exit status 2 (as is any other
    KernelBrainError that reaches `main`)."""


class CommandFailed(KernelBrainError):
    """The command could not do its work; printed as one line, exit status 1."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; a deferred command gets its own only when it is `command`."""
    parser = argparse.ArgumentParser(
        prog="kernelbrain",
        description="Search for a faster Triton kernel for a PyTorch reference.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        if name in DEFERRED_COMMANDS and name != command:
            sub.add_parser(name, help=DEFERRED_COMMANDS[name])
        else:
            importlib.import_module(f"engine.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    argv = [f" {arg}" if NEGATIVE_VALUE.match(arg) else arg for arg in argv]
    args = build_parser(command).parse_args(argv)
    try:
        status = args.handler(args) or EXIT_OK
        sys.stdout.flush()  # a reader that went away shows here, not at interpreter exit
        return status
    except UsageError as exc:
        print(f"kernelbrain {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CommandFailed as exc:
        print(f"kernelbrain {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KernelBrainError as exc:  # a user error the command did not word as a UsageError
        print(f"kernelbrain {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # What is still buffered for stdout can go nowhere: send it to /dev/null, quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print(f"kernelbrain {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:  # anything else is a bug: its traceback, then where to report it
        traceback.print_exc()
        print(BUG_REPORT, file=sys.stderr)
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
