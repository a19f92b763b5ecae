"""Machine faults recorded against candidates in a finished bench (issue 30's
env_failures_charged): every candidate of the bench's sessions rejected for a reason that a fault
of the machine can pass for (a crash, a timeout, memory, a launch error, timings that a loaded
host delayed) is checked again alone, on the machine now idle, with `kernelbrain check`; one that
passes there was charged for the machine's fault.

    python -m engine.benchmarks.env_failures BENCH_OUT [--backend cuda] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

# Rejections a machine under load can cause, the likeliest first; the others judge what the
# candidate computed.
FAULT_LIKE = ("crash", "out_of_memory", "timeout", "timing_tampered", "illegal_memory_access",
              "launch_error", "compile_error")  # fmt: skip


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True)  # fmt: skip


def fault_like_rejections(sessions: Path) -> list[dict]:
    """(session, problem, candidate id, reason) of every fault-like rejection in `sessions`."""
    found = []
    for folder in sorted(p for p in sessions.iterdir() if p.is_dir()):
        shown = cli("show", folder.name, "--json", "--all", "--sessions-dir", str(sessions))
        if shown.returncode != 0:
            print(f"{folder.name}: unreadable ({shown.stderr.strip()[-200:]})", flush=True)
            continue
        state = json.loads(shown.stdout)
        for c in state["candidates"]:
            if c["status"] == "rejected" and c["reason"] in FAULT_LIKE:
                found.append({"session": folder.name, "problem": state["problem"],
                              "candidate": c["id"], "reason": c["reason"]})  # fmt: skip
    return sorted(found, key=lambda row: FAULT_LIKE.index(row["reason"]))


def recheck(row: dict, sessions: Path, backend: str) -> dict:
    """`row` with the verdict of the candidate checked again alone."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{row['candidate']}.py"
        exported = cli("export", row["session"], "--candidate", row["candidate"], "-o",
                       str(source), "--sessions-dir", str(sessions))  # fmt: skip
        if exported.returncode != 0:
            return {**row, "again": "unexported", "message": exported.stderr.strip()[-300:]}
        checked = cli("check", row["problem"], str(source), "--backend", backend, "--json")
    try:
        verdict = json.loads(checked.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {**row, "again": "check_failed", "message": checked.stderr.strip()[-300:]}
    again = "passed" if verdict["passed"] else verdict["reason"]
    return {**row, "again": again, "message": verdict["message"][:300]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_out", type=Path, help="the --out folder of a finished bench")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--json", type=Path, help="write the rows and the count here")
    parser.add_argument("--recheck-limit", type=int, help="check again at most this many, the "
                        "likeliest faults first (a check on cuda takes half a minute)")  # fmt: skip
    args = parser.parse_args()
    sessions = args.bench_out / "sessions"
    found = fault_like_rejections(sessions)
    rows = []
    for k, row in enumerate(found):
        over = args.recheck_limit is not None and k >= args.recheck_limit
        rows.append(
            {**row, "again": "not_rechecked"} if over else recheck(row, sessions, args.backend)
        )
        print(json.dumps(rows[-1]), flush=True)
    charged = sum(r["again"] == "passed" for r in rows)
    summary = {"sessions": len([p for p in sessions.iterdir() if p.is_dir()]),
               "fault_like_rejections": len(rows),
               "rechecked": sum(r["again"] != "not_rechecked" for r in rows),
               "env_failures_charged": charged}  # fmt: skip
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({**summary, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
