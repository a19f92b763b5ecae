"""Native code a candidate reaches at run time, refused and reported (the static rules of
engine.gate.static refuse the paths they can see). Armed just before the candidate loads:

- an audit hook (PEP 578: once added, nothing removes it) refuses ctypes and mmap while candidate
  code is on the stack; the import of ctypes, cffi or mmap by candidate code; a library loaded from
  outside the installation and the system's library folders (a file the candidate wrote); and an
  extension module from outside the installation, unless Triton's build or driver code loads it
  (its launchers);
- the import statement refuses ctypes, cffi and mmap to candidate code too: the runner has
  imported them already, and importing a module already imported raises no audit event;
- Triton's build helpers refuse every caller but Triton's build and driver code, and a build
  whose C compiler the candidate redirected.

Code is the candidate's unless it comes from the installation (Python, its packages, the runner);
code objects made to pass for the installation's are refused too. What is refused is kept in
REFUSED, which the runner reports with every reply: the judge rejects the candidate as
`native_code`. A candidate that gets installed code to make the call for it (a callable planted
where the runner calls it, or raw memory written through a ctypes module it got hold of) is
beyond these guards, not beyond the OS sandbox.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import re
import sys
import sysconfig
from typing import NoReturn

# Modules whose use is native code or raw memory.
NATIVE_MODULES = frozenset("ctypes _ctypes cffi _cffi_backend mmap".split())
# triton.runtime.build's helpers that compile C or load the result.
BUILD_HELPERS = (
    "compile_module_from_src compile_module_from_file compile_so_from_src compile_so_from_file "
    "_compile_so _compile_so_from_src _compile_so_from_file _build _load_module_from_path"
).split()
# Where libraries may be loaded from besides the installation (read-only in the sandbox).
SYSTEM_LIBRARIES = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/nvidia",
                    "/usr/local/cuda")  # fmt: skip
TRITON_DRIVER = re.compile(r"triton\.backends\.\w+\.driver")
# Everything refused, by what was reached, in order.
REFUSED: dict[str, None] = {}


class NativeCodeRefused(PermissionError):
    """Raised where candidate code reached native code."""


def refuse(what: str) -> NoReturn:
    REFUSED[what] = None
    raise NativeCodeRefused(
        f"{what} is refused: a candidate's work runs in Triton kernels, never in native code it "
        "builds or loads"
    )


def _prefixes(paths) -> tuple[str, ...]:
    found = {os.path.join(p, "") for path in paths for p in (os.path.abspath(path),
                                                              os.path.realpath(path))}  # fmt: skip
    return tuple(sorted(found))


def installation() -> tuple[str, ...]:
    """Prefixes of the files of Python, torch, triton and the runner (frozen modules too)."""
    import torch
    import triton

    paths = sysconfig.get_paths()
    places = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    places += [os.path.dirname(os.path.dirname(m.__file__)) for m in (torch, triton)]
    places.append(os.path.dirname(__file__))
    return (*_prefixes(places), "<frozen ")


class NativeGuard:
    def __init__(self):
        self.installed = installation()
        self.libraries = _prefixes(SYSTEM_LIBRARIES) + self.installed
        self.import_machinery = ("<frozen importlib.", *_prefixes([os.path.dirname(
            importlib.__file__)]))  # fmt: skip
        self.triton_builders: frozenset[str] = frozenset()  # files of Triton's build and drivers
        self.compiler = {name: os.environ.get(name) for name in ("CC", "CXX")}

    def installed_code(self, filename: str) -> bool:
        return filename.startswith(self.installed)

    def candidate_on_stack(self) -> bool:
        """Whether candidate code is anywhere below the audit event being judged."""
        frame = sys._getframe(2)
        while frame is not None:
            if not self.installed_code(frame.f_code.co_filename):
                return True
            frame = frame.f_back
        return False

    def loaded_by_triton(self) -> bool:
        """Whether Triton's build or driver code called the import machinery below the event."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(self.import_machinery):
            frame = frame.f_back
        return frame is not None and frame.f_code.co_filename in self.triton_builders

    def audit(self, event: str, args: tuple) -> None:
        if event.startswith("ctypes.") or event == "mmap.__new__":
            library = args[0] if event == "ctypes.dlopen" else None
            if isinstance(library, str) and "/" in library:
                if not os.path.realpath(library).startswith(self.libraries):
                    refuse(f"loading the library {library}")
            if self.candidate_on_stack():
                refuse(event)
        elif event == "import":
            name, filename = args[0], args[1]
            if name.split(".")[0] in NATIVE_MODULES and self.candidate_on_stack():
                refuse(f"import {name}")
            extension = isinstance(filename, str) and filename.endswith(EXTENSIONS)
            if extension and not self.installed_code(filename) and not self.loaded_by_triton():
                refuse(f"loading the extension module {filename}")
        elif event in ("compile", "code.__new__", "marshal.loads"):
            # candidate code making code objects that would pass for the installation's
            named = args[1] if event != "marshal.loads" else None
            disguised = named is None or isinstance(named, str) and self.installed_code(named)
            if disguised and not self.installed_code(sys._getframe(1).f_code.co_filename):
                refuse(f"{event} of code named {named}")

    def guarded_import(self, original):
        def guarded(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0 and name.split(".")[0] in NATIVE_MODULES:
                if not self.installed_code(sys._getframe(1).f_code.co_filename):
                    refuse(f"import {name}")
            return original(name, globals, locals, fromlist, level)

        return guarded

    def guard_triton_build(self) -> None:
        """Wrap Triton's build helpers wherever a Triton module holds them."""
        from triton import knobs
        from triton.runtime import build

        self.triton_builders = frozenset({build.__file__} | {
            m.__file__ for n, m in list(sys.modules.items()) if TRITON_DRIVER.fullmatch(n)
        })  # fmt: skip
        wrapped = {
            id(fn): self.only_from(fn, f"triton.runtime.build.{name}", knobs)
            for name in BUILD_HELPERS
            if (fn := getattr(build, name, None)) is not None
        }
        for module_name, module in list(sys.modules.items()):
            if module_name == "triton" or module_name.startswith("triton."):
                for attribute, value in list(vars(module).items()):
                    if id(value) in wrapped:
                        setattr(module, attribute, wrapped[id(value)])

    def only_from(self, helper, name: str, knobs):
        """`helper` for Triton's build and driver code alone, with Triton's own compiler."""

        def guarded(*args, **kwargs):
            if sys._getframe(1).f_code.co_filename not in self.triton_builders:
                refuse(name)
            if knobs.build.impl is not None:
                refuse("triton.knobs.build.impl (Triton's C compiler replaced)")
            for variable, value in self.compiler.items():
                if os.environ.get(variable) != value:
                    refuse(f"the {variable} environment variable (Triton's C compiler changed)")
            return helper(*args, **kwargs)

        return guarded


EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)
_armed: list[NativeGuard] = []


def arm() -> None:
    """Install the guards (once a process), before any candidate code exists in it."""
    if _armed:
        return
    guard = NativeGuard()
    guard.guard_triton_build()
    builtins.__import__ = guard.guarded_import(builtins.__import__)
    sys.addaudithook(guard.audit)
    _armed.append(guard)
