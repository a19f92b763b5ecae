"""What a headless run or resume prints on stdout when its search ends: the best candidate (the
snapshot's `best`, the one `show` and `export` take), its speedup with its interval, the session
and the commands that look at it and export it; as a few lines, or as one JSON object."""

from __future__ import annotations

import json
import shlex
from collections import Counter

from engine.session_files import CANDIDATE_STATUSES

EXPORT_FILE = "best.py"  # what the suggested export command writes


def speedup_number(value: float) -> str:
    """2.34; a speedup far below one (the cpu backend's) with two significant digits."""
    return f"{value:.2f}" if value >= 0.01 else f"{value:.2g}"


def speedup_with_interval(best: dict) -> str:
    """ "2.34x [2.30, 2.41]": a speedup and its confidence interval."""
    low, high = map(speedup_number, best["speedup_ci"])
    return f"{speedup_number(best['speedup'])}x [{low}, {high}]"


def no_best_reason(snap: dict) -> str:
    """Why a session has no best: no candidate timed, what became of those it has, and why the
    search ended."""
    total = snap["candidates_total"]
    if not total:
        why = "no candidate was generated"
    else:
        counts = Counter(c["status"] for c in snap["candidates"])
        held = ", ".join(f"{counts[s]} {s}" for s in CANDIDATE_STATUSES if counts[s])
        listed = f" ({held})" if len(snap["candidates"]) == total else ""
        why = f"none of its {total} candidates was timed{listed}"
    return f"{why}; {snap['stop_reason']}" if snap.get("stop_reason") else why


def answer_of(snap: dict, sessions_dir: str | None = None) -> dict:
    """The answer's facts. `sessions_dir`: the --sessions-dir the run was given, which the
    commands need to find the session."""
    name, best = snap["session"], snap["best"]
    where = f" --sessions-dir {shlex.quote(sessions_dir)}" if sessions_dir else ""
    return {
        "session": name,
        "problem": snap["problem"],
        "backend": snap["backend"],
        "state": snap["state"],
        "stop_reason": snap["stop_reason"],
        "best": best,
        "no_best": None if best else no_best_reason(snap),
        "timings_meaningful": snap["timings_meaningful"],
        "show": f"kernelbrain show {name}{where}",
        "export": f"kernelbrain export {name}{where} -o {EXPORT_FILE}" if best else None,
    }


def answer_lines(answer: dict) -> list[str]:
    best = answer["best"]
    if best is None:
        lines = [f"no best: {answer['no_best']} (session {answer['session']})"]
    else:
        note = "" if answer["timings_meaningful"] else "; cpu: timings not meaningful"
        lines = [
            f"best {best['id']}: {speedup_with_interval(best)} over PyTorch eager at rung "
            f"{best['rung']} (session {answer['session']}{note})"
        ]
    lines.append(f"look:   {answer['show']}")
    if answer["export"]:
        lines.append(f"export: {answer['export']}")
    return lines


def print_answer(snap: dict, sessions_dir: str | None, as_json: bool) -> None:
    answer = answer_of(snap, sessions_dir)
    if as_json:
        print(json.dumps(answer), flush=True)
    else:
        print("\n".join(answer_lines(answer)), flush=True)
