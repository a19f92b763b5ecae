"""The project's own errors: one base, so that the command line tells a user error from a bug.

This module is the bottom layer: it imports nothing of the project's.
"""

from __future__ import annotations


class KernelBrainError(Exception):
    """An error the user can act on: its message says what is wrong and what to do. The command
    line prints it as one line (exit status 2); any other exception is a bug and shows its
    traceback."""


class InputError(KernelBrainError, ValueError):
    """A value the user gave (an option, a variable) that cannot be used; the message names it and
    says what to give instead."""


class SetupError(KernelBrainError, RuntimeError):
    """What the command needs is not there (a GPU, Ray, a reachable cluster); the message says
    what to install or start, or which option to use instead."""
