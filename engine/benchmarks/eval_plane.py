"""What the evaluation plane costs a real search, before and after a change, side by side: for
each problem one headless search of a fixed number of evaluations in each tree (the older one
first), run as the user runs it (`python -m engine.cli run`, a subprocess, its own cold Triton
cache), then read back through `show --json` and the session's events. A row per (problem, tree):
evaluations per GPU-second, the command's wall time, the steady wall time per evaluation (first
finished evaluation to the last: `evaluated` and `rejected` events), the wait for the first one,
where the seconds went (the ledger's activities and idle time), the best speedup and the machine
faults. Rows are printed and appended to `--out` as they come; a table ends the run.

    python -m engine.benchmarks.eval_plane --backend cuda --evals 40 --before OLD_CHECKOUT \\
        --out eval_plane.jsonl --results-json docs/results/eval_plane.json

`--before` is a checkout of an older commit (`git worktree add`, or a `git archive` unpacked:
its commit is then read from its `.commit` file or given with `--before-commit`); its commands
run there with it first on PYTHONPATH, so they import its engine. `--check FILE` also times
`engine.cli check` of FILE in each tree (with `--skip-before` too, which skips only the before
tree's searches). `--results-json` sums up every row of `--out`, the latest per problem and tree.

`--rounds N` runs every search N times, the trees in turn each round, each round ending with a
`python -c "import torch"` in the same venv: the run ends with each search's median wall time as
a multiple of the median import (issue 30's cpu target: rmsnorm within 7x).

    python -m engine.benchmarks.eval_plane --backend cpu --problems rmsnorm --rounds 5 \
        --before OLD_CHECKOUT
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ("groupconv", "matvec", "rmsnorm", "softmax", "linear_relu_div", "sdpa")
FINISHED = ("evaluated", "rejected")  # events that end an evaluation
IMPORT_TORCH = "import torch"
ACTIVITIES = (("gpu_seconds_by_activity", ("reference", "check", "time", "profile")),
              ("cpu_seconds_by_activity", ("compile", "precompile")))  # fmt: skip


def commit(tree: Path, given: str | None) -> str | None:
    """`given`, else the tree's short HEAD where it is a git work tree's top, else `.commit`."""
    if given:
        return given
    git = ["git", "-C", str(tree), "rev-parse"]
    top = subprocess.run([*git, "--show-toplevel"], capture_output=True, text=True)
    if top.returncode == 0 and Path(top.stdout.strip()).resolve() == tree.resolve():
        return subprocess.run([*git, "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or None  # fmt: skip
    marker = tree / ".commit"
    return (marker.read_text().strip() or None) if marker.is_file() else None


def call(tree: Path, args: list[str], timeout: float, cache: Path | None = None):
    """`python -m engine.cli ARGS` in `tree`, its engine first on the path: (rc, stdout, wall)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(tree), os.environ.get("PYTHONPATH")) if p))  # fmt: skip
    if cache is not None:
        env["TRITON_CACHE_DIR"] = str(cache)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *args], cwd=tree, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return 124, out, time.monotonic() - started
    return proc.returncode, out, time.monotonic() - started


def free_name(sessions: Path, problem: str, evals: int) -> str:
    n = 1
    while (sessions / f"{problem}-{evals}e-{n}").exists():
        n += 1
    return f"{problem}-{evals}e-{n}"


def events(session: Path) -> list[dict]:
    path = session / "events.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.strip()]


def search_row(problem: str, tree: str, path: Path, args, sessions: Path) -> dict:
    """One search of `problem` in `path` and what it cost."""
    sessions.mkdir(parents=True, exist_ok=True)
    name = free_name(sessions, problem, args.evals)
    where = ["--sessions-dir", str(sessions)]
    started = time.time()
    rc, out, wall = call(path, ["run", problem, "--headless", "--budget", f"{args.evals}evals",
                                "--backend", args.backend, "--session", name, *where],
                         args.timeout, sessions.parent / "triton" / f"{tree}-{name}")  # fmt: skip
    _, shown, _ = call(path, ["show", name, "--json", *where], 120)
    (sessions / name).mkdir(exist_ok=True)
    (sessions / name / "show.json").write_text(shown)
    try:
        show = json.loads(shown)
    except json.JSONDecodeError:
        show = {}
    ledger = show.get("ledger") or {}
    seen = events(sessions / name)
    ends = [e["ts"] for e in seen if e.get("kind") in FINISHED]
    first = round(ends[0] - started, 3) if ends else None
    spread = {"start": first, "idle": ledger.get("idle_seconds")}
    for key, names in ACTIVITIES:
        spread |= {n: round((ledger.get(key) or {}).get(n, 0.0), 3) for n in names}
    evaluations, gpu = ledger.get("evaluations"), ledger.get("gpu_seconds")
    return {"problem": problem, "tree": tree, "commit": commit(path, args.commits[tree]),
            "session": name, "evaluations": evaluations,
            "gpu_seconds": round(gpu, 3) if gpu is not None else None,
            "evals_per_gpu_s": round(evaluations / gpu, 4) if evaluations and gpu else None,
            "wall_s": round(wall, 3),
            "wall_s_per_eval": (round((ends[-1] - ends[0]) / (len(ends) - 1), 3)
                                if len(ends) > 1 else None),
            "first_eval_s": first, "where": spread,
            "best_speedup": (show.get("best") or {}).get("speedup"),
            "machine_faults": sum(e.get("kind") == "machine_fault" for e in seen),
            "rc": rc, "tail": out[-400:] if rc else ""}  # fmt: skip


def check_row(tree: str, path: Path, args) -> dict:
    rc, out, wall = call(path, ["check", args.check_problem, str(args.check.resolve()),
                                "--backend", args.backend], args.timeout)  # fmt: skip
    return {"problem": args.check_problem, "tree": tree, "commit": commit(path, args.commits[tree]),
            "check_wall_s": round(wall, 3), "rc": rc, "tail": out[-400:] if rc else ""}  # fmt: skip


def import_torch_row() -> dict:
    started = time.monotonic()
    rc = subprocess.run([sys.executable, "-c", "import torch"]).returncode
    return {"problem": IMPORT_TORCH, "import_torch_s": round(time.monotonic() - started, 3),
            "rc": rc}  # fmt: skip


def torch_multiples(rows: list[dict]) -> list[str]:
    """Each (problem, tree)'s median search wall time against the median `import torch`."""
    imports = [r["import_torch_s"] for r in rows if "import_torch_s" in r]
    if not imports:
        return []
    base = statistics.median(imports)
    walls: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if "evaluations" in r and not r["rc"]:
            walls.setdefault((r["problem"], r["tree"]), []).append(r["wall_s"])
    return [f"{problem} {tree}: median {statistics.median(w):.2f} s over {len(w)} = "
            f"{statistics.median(w) / base:.2f}x import torch (median {base:.2f} s over "
            f"{len(imports)})" for (problem, tree), w in walls.items()]  # fmt: skip


def emit(row: dict, out: Path | None) -> None:
    print(json.dumps(row), flush=True)
    if out is not None:
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")


def summary(rows: list[dict]) -> dict:
    """The latest row per problem and tree: the after rows, the before ones and the check's."""
    latest = {(r["problem"], r["tree"], "check_wall_s" in r): r for r in rows if "tree" in r}
    keys = ("problem", "evals_per_gpu_s", "wall_s_per_eval", "evaluations")
    picked = {tree: [{k: r.get(k) for k in keys} for (_, t, c), r in latest.items()
                     if t == tree and not c] for tree in ("after", "before")}  # fmt: skip
    checks = {t: r["check_wall_s"] for (_, t, c), r in latest.items() if c}
    return {"rows": picked["after"], "check_wall_s": checks.get("after"),
            "before": picked["before"], "before_check_wall_s": checks.get("before")}  # fmt: skip


def table(rows: list[dict]) -> str:
    def cell(value, spec):
        return "-" if value is None else format(value, spec)

    lines = [f"{'problem':<16}{'tree':<8}{'evals/GPU-s':>12}{'wall/eval':>11}{'wall':>9}"
             f"{'best':>9}{'rc':>4}"]  # fmt: skip
    for r in rows:
        if "import_torch_s" in r:
            lines.append(f"{IMPORT_TORCH:<16}{'':<8}{'':>12}{'':>11}{r['import_torch_s']:>9.1f}"
                         f"{'':>9}{r['rc']:>4}")  # fmt: skip
            continue
        if "check_wall_s" in r:
            lines.append(f"{r['problem'] + ' check':<16}{r['tree']:<8}{'':>12}{'':>11}"
                         f"{r['check_wall_s']:>9.1f}{'':>9}{r['rc']:>4}")  # fmt: skip
            continue
        lines.append(f"{r['problem']:<16}{r['tree']:<8}{cell(r['evals_per_gpu_s'], '.3f'):>12}"
                     f"{cell(r['wall_s_per_eval'], '.2f'):>11}{r['wall_s']:>9.1f}"
                     f"{cell(r['best_speedup'], '.3f'):>9}{r['rc']:>4}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval_plane")
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    parser.add_argument("--evals", type=int, default=40)
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--before", type=Path, help="a checkout of the older commit")
    parser.add_argument("--before-commit", help="its commit, where it holds no git repository")
    parser.add_argument("--after-commit", help="this tree's, where it holds no git repository")
    parser.add_argument("--skip-before", action="store_true", help="no searches in --before")
    parser.add_argument("--out", type=Path, help="a JSON-lines file the rows are appended to")
    parser.add_argument("--sessions-dir", type=Path, help="(default: a new temporary folder)")
    parser.add_argument("--check", type=Path, help="a candidate file `check` is timed on")
    parser.add_argument("--check-problem", default="softmax")
    parser.add_argument("--results-json", type=Path, help="the summary of --out's rows, written")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a command may take")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="searches per problem and tree; more than 1 also times import torch",
    )
    args = parser.parse_args(argv)
    args.commits = {"before": args.before_commit, "after": args.after_commit}
    sessions = args.sessions_dir or Path(tempfile.mkdtemp(prefix="eval_plane-"))
    trees = [("before", args.before.resolve())] if args.before else []
    trees.append(("after", ROOT))
    rows = []
    for _ in range(args.rounds):
        for problem in args.problems:
            for tree, path in trees:
                if not (tree == "before" and args.skip_before):
                    rows.append(search_row(problem, tree, path, args, sessions / tree))
                    emit(rows[-1], args.out)
        if args.rounds > 1:
            rows.append(import_torch_row())
            emit(rows[-1], args.out)
    for tree, path in trees if args.check else ():
        rows.append(check_row(tree, path, args))
        emit(rows[-1], args.out)
    print(table(rows), *torch_multiples(rows), sep="\n", flush=True)
    if args.results_json is not None:
        kept = rows
        if args.out is not None and args.out.is_file():
            kept = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
        args.results_json.write_text(json.dumps(summary(kept), indent=1) + "\n")
    return 1 if any(r["rc"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
