"""Every KERNELBRAIN_* environment variable the project reads, in one typed place.

Each is read from the environment when asked (`value`), not at import: a process may set one for
the processes it starts, and tests set them just before a call. `read_all` reads and checks them
all (`kernelbrain doctor` lists them). A value that cannot be used is an InputError naming the
variable and what to give. This module is the bottom layer (it imports only engine.errors); the
sandboxed runner (engine.runner) reads none of them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

from engine.errors import InputError


@dataclass(frozen=True)
class Setting:
    """One variable: its name, its type, its default (what an unset or blank variable means),
    one line on what it does, and how its text is read (None when it cannot be used) with what
    to give instead."""

    name: str
    type: type
    default: object
    meaning: str
    parse: Callable[[str], object]
    wanted: str
    default_words: str = ""  # the default in words, where its value says too little

    def read(self, environ=None) -> object:
        text = (os.environ if environ is None else environ).get(self.name, "").strip()
        if not text:
            return self.default
        found = self.parse(text)
        if found is None:
            raise InputError(f"{self.name}={text!r}: {self.wanted}")
        return found


def _count(least: int) -> Callable[[str], int | None]:
    return lambda text: int(text) if text.isdigit() and int(text) >= least else None


def _non_negative(text: str) -> float | None:
    try:
        found = float(text)
    except ValueError:
        return None
    return found if found >= 0 and math.isfinite(found) else None


BWRAP = "KERNELBRAIN_BWRAP"
COMPILE_WORKERS = "KERNELBRAIN_COMPILE_WORKERS"
DEVICE_RESERVE_GB = "KERNELBRAIN_DEVICE_RESERVE_GB"
FAULT_BACKOFF_S = "KERNELBRAIN_FAULT_BACKOFF_S"
JUDGES_PER_GPU = "KERNELBRAIN_JUDGES_PER_GPU"
SESSIONS = "KERNELBRAIN_SESSIONS"
SIM_PACE = "KERNELBRAIN_SIM_PACE"
TRUST_CANDIDATES = "KERNELBRAIN_TRUST_CANDIDATES"

SETTINGS = {
    s.name: s
    for s in (
        Setting(BWRAP, str, None, "the bubblewrap binary that boxes candidates (a path); 0 turns "
                "the OS sandbox off (trusted use)", str, "give a path to bwrap, or 0",
                "bwrap on PATH"),
        Setting(COMPILE_WORKERS, int, 1, "how many compile workers compile candidates ahead "
                "beside the GPU (0: none)", _count(0),
                "not a count: give 1 (the default), more, or 0 to compile no candidate ahead"),
        Setting(DEVICE_RESERVE_GB, float, 0.0, "GiB of the device's memory an evaluation leaves "
                "free for other work: a float64 reference that would not fit beside it waits in "
                "host memory, and timings rotate over fewer input sets", _non_negative,
                "give GiB, 0 or more"),
        Setting(FAULT_BACKOFF_S, float, 2.0, "the first wait, in seconds, before a machine fault "
                "is asked again (doubling; 0 asks again at once)", _non_negative,
                "give the first wait in seconds, 0 or more"),
        Setting(JUDGES_PER_GPU, int, 1, "how many judges share one GPU (bench --jobs N sets it "
                "for its judges), splitting the reference banks' memory", _count(1),
                "give how many judges share a GPU (1 or more)"),
        Setting(SESSIONS, str, "sessions", "the folder that holds the sessions (--sessions-dir "
                "wins over it)", str, "give a folder"),
        Setting(SIM_PACE, float, 1.0, "wall seconds a sim evaluation lasts per GPU-second it "
                "simulates", _non_negative, "give the wall seconds a sim evaluation lasts per "
                "GPU-second it simulates (1: a GPU's pace, 0: at once)"),
        Setting(TRUST_CANDIDATES, bool, False, "1: candidate code is trusted, as with "
                "--trust-candidates (run and resume set it for the engines they start)",
                lambda text: text == "1", "give 1 to trust candidates, or leave it unset"),
    )
}  # fmt: skip


def value(name: str, environ=None) -> object:
    """The variable's value, read from `environ` (default: os.environ) now; InputError when it
    cannot be used."""
    return SETTINGS[name].read(environ)


def read_all(environ=None) -> dict[str, object]:
    """Every variable's value, checked; the first that cannot be used is an InputError."""
    return {name: setting.read(environ) for name, setting in SETTINGS.items()}


def describe(environ=None) -> list[tuple[str, str]]:
    """(name, what it is set to) for every variable, as `doctor` lists them: the value it is set
    to, or "unset, default X"; InputError for one that cannot be used."""
    environ = os.environ if environ is None else environ
    rows = []
    for name, setting in SETTINGS.items():
        found = setting.read(environ)
        if environ.get(name, "").strip():
            shown = repr(found)
        else:
            shown = f"unset, default {setting.default_words or repr(setting.default)}"
        rows.append((name, f"{shown} - {setting.meaning}"))
    return rows
