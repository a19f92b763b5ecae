"""`kernelbrain problems`: the built-in problems, their sizes per tier and replaced operators.

Listing them traces each reference on the meta device, which needs torch (seconds to import), so
the listing is kept in the sessions folder under a hash of every file that decides it (the
problems, the code that loads and traces them, this module, torch's version): a listing is
computed once for each state of those files, and read back without torch after that."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from pathlib import Path

from engine.problems.problem import TIERS
from engine.session_files import read_json, sessions_root, write_json_atomic

ENGINE = Path(__file__).resolve().parents[1]
# A plain file in the sessions folder: `ls` lists folders that hold a session, never files.
LISTING_CACHE = ".problems-listing.json"


def register(subparsers) -> None:
    p = subparsers.add_parser("problems", help="list the built-in problems and their sizes")
    p.set_defaults(handler=run)


def describe(size) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.params.items()) or "default"


def describe_tolerance(tolerance) -> str:
    """The problem's tolerance as precision-value pairs: one value for all, or one for each."""
    if tolerance is None:
        return "twice PyTorch's own error"
    if not isinstance(tolerance, dict):
        tolerance = {"every precision": tolerance}
    return ", ".join(f"{precision} {value:g}" for precision, value in tolerance.items())


def listing() -> str:
    """What `problems` prints, computed from the problems themselves (imports torch)."""
    from engine.problems import builtin_names, load_problem

    lines = []
    for name in builtin_names():
        problem = load_problem(name)
        doc = (ast.get_docstring(ast.parse(problem.source)) or "").split("\n")[0]
        lines.append(f"{name}: {doc}")
        lines.append(f"  replaces: {', '.join(problem.replaces)}")
        lines.append(f"  tolerance: {describe_tolerance(problem.tolerance)}")
        for tier in TIERS:
            for size in problem.tier(tier):
                spec = problem.output_specs[size.label][0]
                lines.append(f"  {size.label:6} {describe(size)}  -> {spec[1]}{spec[0]}")
    return "".join(f"{line}\n" for line in lines)


def listing_inputs() -> list[Path]:
    """Every file whose content decides the listing: the problems and the code that loads and
    traces them (all of engine/problems), the size-call helper, this module, torch's version."""
    files = sorted((ENGINE / "problems").rglob("*.py"))
    files += [ENGINE / "runner" / "calls.py", Path(__file__).resolve()]
    torch = importlib.util.find_spec("torch")  # finds the package without importing it
    if torch is not None and torch.origin:
        files.append(Path(torch.origin).parent / "version.py")
    return files


def listing_key(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        content = path.read_bytes()
        digest.update(f"{path.name}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()


def cached_listing(cache: Path, key: str) -> str | None:
    try:
        kept = read_json(cache)
    except (OSError, ValueError):
        return None
    if isinstance(kept, dict) and kept.get("key") == key and isinstance(kept.get("text"), str):
        return kept["text"]
    return None


def keep_listing(cache: Path, key: str, text: str) -> None:
    """Keep the listing for the next call; a sessions folder that cannot be written only costs
    the next call the time of computing it again."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(cache, {"key": key, "text": text})
    except OSError:
        pass


def run(args) -> int:
    cache = sessions_root() / LISTING_CACHE
    key = listing_key(listing_inputs())
    text = cached_listing(cache, key)
    if text is None:
        text = listing()
        keep_listing(cache, key, text)
    sys.stdout.write(text)
    return 0
