"""What matching derives from a problem, kept per process: a whole model's build and run on the
meta device takes seconds (an LSTM's tens), every family asks for the same trace and binding,
and a session matches at its creation and again at its start."""

from __future__ import annotations

import functools
import threading

KEPT = 256  # entries per memoized function; the oldest goes first


def memoized(key_of):
    """Decorate a function to compute once per `key_of(*args)` (a hashable key) and process."""

    def decorate(fn):
        kept: dict = {}
        held = threading.Lock()  # a bench's threads share the memo (not the computing)

        @functools.wraps(fn)
        def memo(*args):
            key = key_of(*args)
            with held:
                if key in kept:
                    return kept[key]
            value = fn(*args)
            with held:
                if len(kept) >= KEPT:
                    kept.pop(next(iter(kept)))
                return kept.setdefault(key, value)

        return memo

    return decorate


def at_size(problem, size=None) -> tuple:
    """A problem file's source at one size (default: the smallest), what a model built from it
    on the meta device depends on."""
    params = (size or problem.smallest).params
    return str(problem.path), problem.source, repr(sorted(params.items()))
