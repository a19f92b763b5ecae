"""The CLI as a user meets it over SSH, on real sim sessions: lookups that survive stray files,
budgets that only add, true states after a kill or Ctrl-C, one-line errors, degenerate input
refused, and session-file commands that never load torch. Kills, signals, closed pipes, imports
and read-only mounts are tried on real processes; the other commands run in this one."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli import CLI, kernelbrain

from engine.compose import create_session
from engine.session.settings import SessionSettings
from engine.session_files import (
    BEST_MEANING,
    SessionPaths,
    engine_running,
    read_events,
    read_snapshot,
    send_command,
)

# A mount namespace of our own lets the tests bind a folder read-only: even root cannot write
# there (permission bits do not stop root, a read-only mount does).
READ_ONLY = [
    "unshare", "--mount", "--map-root-user", "sh", "-c",
    'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
]  # fmt: skip


def kb(*args, sessions, prefix=()):
    """The command in this process; in a real one under `prefix` (a read-only mount)."""
    if not prefix:
        return kernelbrain(*args, "--sessions-dir", sessions)
    return subprocess.run([*prefix, *CLI, *args, "--sessions-dir", str(sessions)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def sim_run(name, sessions, budget="12evals", problem="softmax"):
    out = kb(
        "run", problem, "--backend", "sim", "--seed", "0", "--budget", budget,
        "--session", name, "--headless", sessions=sessions,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return SessionPaths(sessions / name)


def one_line(out) -> str:
    """The error a command gave: exactly one line, no traceback."""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def show_state(name, sessions) -> tuple[str, str]:
    """The state `show --json` and `ls` give for a session."""
    data = json.loads(kb("show", name, "--json", sessions=sessions).stdout)
    rows = [line.split() for line in kb("ls", sessions=sessions).stdout.splitlines()[1:]]
    return data["state"], next(row[2] for row in rows if row[0] == name)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> SessionPaths:
    """A softmax search on sim that spent its 12 evaluations. Tests that change it copy it."""
    return sim_run("s", tmp_path_factory.mktemp("sessions"))


def copy_of(paths: SessionPaths, tmp_path) -> SessionPaths:
    return SessionPaths(shutil.copytree(paths.root, tmp_path / "sessions" / paths.name))


def test_ls_skips_plain_files_and_lookups_name_the_folder(finished, tmp_path):
    sessions = copy_of(finished, tmp_path).root.parent
    (sessions / "README.md").write_text("sessions live here\n")  # as the repository ships it
    (sessions / "notes").mkdir()
    out = kb("ls", sessions=sessions)
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == ["SESSION", "s"]
    line = one_line(kb("show", "nope", sessions=sessions))
    assert f"no session 'nope' in {sessions}/ (sessions there: s)" in line
    assert "`kernelbrain ls`" in line and "--sessions-dir" in line
    empty = kb("ls", sessions=tmp_path / "none")
    assert "kernelbrain run PROBLEM" in one_line(empty) and str(tmp_path / "none") in empty.stderr


def test_adding_budget_never_takes_any_away(tmp_path):
    """Added to a limit, budget raises it; added to a kind with no limit (from the CLI or, as
    the TUI's `+` does, straight into the inbox) it changes nothing and the run goes on."""
    paths = sim_run("s", tmp_path, budget="12evals,1h")
    out = kb("budget", "s", "+5gpu-s", sessions=tmp_path)
    assert out.returncode == 0 and "no gpu_seconds limit, so it stays unlimited" in out.stderr
    assert not list(paths.inbox.glob("*.json")), "a budget that changes nothing was sent"
    from_tui = send_command(paths, "budget", amount="+5gpu-s")
    assert kb("budget", "s", "+5s", sessions=tmp_path).returncode == 0
    assert kb("budget", "s", "+6evals", sessions=tmp_path).returncode == 0
    out = kb("resume", "s", "--headless", sessions=tmp_path)
    assert out.returncode == 0, out.stderr
    snap = read_snapshot(paths)
    assert snap["budget"]["limits"] == {"evaluations": 18, "wall_seconds": 3605}
    assert snap["ledger"]["evaluations"] == 18
    assert snap["stop_reason"] == "budget spent: evaluations"
    record = next(c for c in snap["commands"] if c["id"] == from_tui["id"])
    assert (record["status"], record["message"]) == (
        "applied",
        "no gpu_seconds limit: it stays unlimited",
    )


def test_resume_of_a_spent_session_says_to_add_budget_first(finished, tmp_path):
    paths = copy_of(finished, tmp_path)
    events = len(read_events(paths))
    out = kb("resume", "s", "--headless", sessions=paths.root.parent)
    line = one_line(out)
    assert out.returncode == 0  # finished, not failed: a resume-until-done loop ends
    assert (
        "spent its evaluations limit of 12" in line and "`kernelbrain budget s +100evals`" in line
    )
    assert len(read_events(paths)) == events, "the engine started anyway"
    assert kb("budget", "s", "+3evals", sessions=paths.root.parent).returncode == 0
    assert kb("resume", "s", "--headless", sessions=paths.root.parent).returncode == 0
    assert read_snapshot(paths)["ledger"]["evaluations"] == 15


def wait_for_step(paths: SessionPaths, step: int, timeout=120) -> None:
    deadline = time.monotonic() + timeout
    while (read_snapshot(paths) or {}).get("step", -1) < step:
        assert time.monotonic() < deadline, "the engine made no progress"
        time.sleep(0.05)


def test_ctrl_c_and_kill_leave_the_session_interrupted(tmp_path):
    """After Ctrl-C (one line, exit 130) or kill -9, no engine holds the session: `show`,
    `show --json` and `ls` all say interrupted, never running."""
    paths = SessionPaths(tmp_path / "live")
    run = [*CLI, "run", "matvec", "--backend", "sim", "--budget", "100000evals",
           "--session", "live", "--headless", "--sessions-dir", str(tmp_path)]  # fmt: skip
    # Ctrl-C as in a terminal, even where pytest runs with SIGINT ignored (a script's background
    # job), which its children would inherit
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    proc = subprocess.Popen(run, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    wait_for_step(paths, 3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "interrupted: session live stopped; `kernelbrain resume live` continues it"
    )
    assert show_state("live", tmp_path) == ("interrupted", "interrupted")
    text = kb("show", "live", sessions=tmp_path).stdout
    assert "state: interrupted (no engine runs it: `kernelbrain resume live`" in text

    resume = [*CLI, "resume", "live", "--headless", "--sessions-dir", str(tmp_path)]
    proc = subprocess.Popen(resume, stderr=subprocess.DEVNULL)
    wait_for_step(paths, read_snapshot(paths)["step"] + 3)
    assert show_state("live", tmp_path) == ("running", "running")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert show_state("live", tmp_path) == ("interrupted", "interrupted")


def test_a_headless_resume_that_finds_a_pause_says_so_once(finished, tmp_path):
    """A pause queued on a stopped session: `resume --headless` says once that it is paused and
    what continues it, and repeats no progress line while it waits."""
    paths = copy_of(finished, tmp_path)
    sessions = paths.root.parent
    assert kb("budget", "s", "+4evals", sessions=sessions).returncode == 0
    assert kb("pause", "s", sessions=sessions).returncode == 0
    resume = [*CLI, "resume", "s", "--headless", "--sessions-dir", str(sessions)]
    proc = subprocess.Popen(resume, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while (read_snapshot(paths) or {}).get("state") != "paused" or not engine_running(paths):
        assert time.monotonic() < deadline and proc.poll() is None, "the engine did not pause"
        time.sleep(0.05)
    time.sleep(3.0)  # three progress intervals of waiting
    assert kb("unpause", "s", sessions=sessions).returncode == 0
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert sum("paused by a pause command; `kernelbrain unpause s`" in line for line in lines) == 1
    waiting = [line for line in lines if line.startswith("[s step 12]")]
    assert len(waiting) == 1, err
    assert read_snapshot(paths)["ledger"]["evaluations"] == 16


PAUSE_S = 8.5  # how long the search below stands paused: longer than its whole wall-time limit
WALL_LIMIT_S = 8  # its running time (16 sim evaluations, two engine starts) stays well below


def test_a_pause_spends_no_budget(tmp_path):
    """A search paused by `pause` for longer than its wall-time limit: while it stands paused
    the ledger counts paused_seconds (stored and published as the pause goes on) and no wall
    second, so the limit is not spent and the search ends on its evaluations; `show --json`,
    `show` and the published snapshot give the same figures."""
    paths = sim_run("s", tmp_path, budget=f"12evals,{WALL_LIMIT_S}s")
    assert kb("budget", "s", "+4evals", sessions=tmp_path).returncode == 0
    assert kb("pause", "s", sessions=tmp_path).returncode == 0
    resume = [*CLI, "resume", "s", "--headless", "--sessions-dir", str(tmp_path)]
    proc = subprocess.Popen(resume, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while (read_snapshot(paths) or {}).get("state") != "paused" or not engine_running(paths):
        assert time.monotonic() < deadline and proc.poll() is None, "the engine did not pause"
        time.sleep(0.05)
    at_pause = read_snapshot(paths)["ledger"]
    time.sleep(PAUSE_S)
    during = read_snapshot(paths)["ledger"]
    assert during["wall_seconds"] == at_pause["wall_seconds"]
    assert during["idle_seconds"] == at_pause["idle_seconds"]
    assert during["paused_seconds"] >= PAUSE_S - 1.5  # published about once a second
    assert kb("unpause", "s", sessions=tmp_path).returncode == 0
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err

    data = json.loads(kb("show", "s", "--json", sessions=tmp_path).stdout)
    ledger = data["ledger"]
    assert data["stop_reason"] == "budget spent: evaluations" and ledger["evaluations"] == 16
    assert PAUSE_S <= ledger["paused_seconds"] < PAUSE_S + 30
    assert ledger["wall_seconds"] < WALL_LIMIT_S
    # 4 evaluations and no pause (a loaded machine may take seconds over them)
    assert ledger["wall_seconds"] - at_pause["wall_seconds"] < PAUSE_S / 2
    assert ledger["idle_seconds"] - at_pause["idle_seconds"] < PAUSE_S / 2
    assert read_snapshot(paths)["ledger"] == ledger  # what the engine published last
    assert (
        f"wall clock: {ledger['wall_seconds']:.1f}s spent ({ledger['idle_seconds']:.1f}s idle); "
        f"{ledger['paused_seconds']:.1f}s paused, which spends no budget"
    ) in kb("show", "s", sessions=tmp_path).stdout.splitlines()


@pytest.fixture(scope="module")
def matvec_session(tmp_path_factory) -> SessionPaths:
    """A matvec search on sim that spent 12 evaluations: 21 candidates, and its best (c0006,
    confirmed at rung 2) scores below c0007, measured only at rung 1."""
    return sim_run("m", tmp_path_factory.mktemp("sessions"), problem="matvec")


def table_rows(text: str) -> list[list[str]]:
    """The candidate rows of `show`'s table as cells: its mark ("*" on the best's, else ""),
    id, rung, status, speedup, score, origin."""
    rows = (line for line in text.splitlines() if re.match(r"^[* ] +c\d{4} ", line))
    return [[line[0].strip(), *line[1:].split()] for line in rows]


def test_show_marks_the_best_first_and_says_how_many_it_shows(matvec_session):
    sessions = matvec_session.root.parent
    data = json.loads(kb("show", "m", "--json", sessions=sessions).stdout)
    best, rows, total = data["best"], data["candidates"], data["candidates_total"]
    # The best as the help defines it: the top score at the highest rung reached, not the top
    # score of all (a candidate only measured lower scores higher here).
    reached = max(c["rung"] for c in rows if c["score"] is not None)
    at_top = [c for c in rows if c["rung"] == reached and c["status"] in ("alive", "done")]
    assert best["rung"] == reached and best["id"] == max(at_top, key=lambda c: c["score"])["id"]
    best_score = next(c["score"] for c in rows if c["id"] == best["id"])
    assert any(c["score"] is not None and c["score"] > best_score for c in rows)

    text = kb("show", "m", sessions=sessions).stdout
    assert f"best (*): {BEST_MEANING};" in text
    shown = table_rows(text)
    assert shown[0][:2] == ["*", best["id"]]
    assert [row[0] for row in shown].count("*") == 1
    assert total == len(rows) > 20 and len(shown) == 20
    assert text.splitlines()[-1] == (
        f"20 of {total} shown (`kernelbrain show m --sessions-dir {sessions} --all` for every "
        "candidate)"
    )
    everything = kb("show", "m", "--all", sessions=sessions).stdout
    listed = table_rows(everything)
    assert len(listed) == total and listed[0][:2] == ["*", best["id"]]
    assert {row[1] for row in listed[1:]} == {c["id"] for c in rows} - {best["id"]}
    assert " shown" not in everything.splitlines()[-1]


def test_the_help_the_readme_and_the_session_format_say_what_best_is():
    """One definition of the best, in the words BEST_MEANING holds (the TUI's help and status
    line quote it too: tests/tui/test_tui_details.py)."""
    for argv in (["show", "--help"], ["run", "--help"], ["export", "--help"]):
        out = kernelbrain(*argv)
        assert BEST_MEANING in " ".join(out.stdout.split()), argv
    root = Path(__file__).resolve().parents[1]
    for doc in ("README.md", "docs/session-format.md"):
        assert BEST_MEANING in " ".join((root / doc).read_text().split()), doc


def test_session_file_commands_load_neither_torch_nor_duckdb(finished, tmp_path):
    """What `--help`, `ls`, `pin`, `pause` and `budget` import, and `show`, which reads the
    DuckDB file but no torch (checked in a fresh interpreter)."""
    paths = copy_of(finished, tmp_path)
    code = f"""
import contextlib, io, json, sys
from engine.cli import main
loaded = lambda: sorted({{"torch", "triton", "numpy", "duckdb", "textual"}} & set(sys.modules))
folder = ["--sessions-dir", {str(paths.root.parent)!r}]
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(["--help"])
codes = [main([*argv, *folder]) for argv in (["ls"], ["pin", "s", "c0001"], ["pause", "s"],
                                             ["budget", "s", "+1evals"])]
after_files = loaded()
with contextlib.redirect_stdout(io.StringIO()):
    codes.append(main(["show", "s", "--json", *folder]))
print(json.dumps([codes, after_files, loaded()]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    codes, after_files, after_show = json.loads(out.stdout.splitlines()[-1])
    assert codes == [0, 0, 0, 0, 0]
    assert after_files == []
    assert after_show == ["duckdb"]


@pytest.fixture
def read_only_mounts(tmp_path):
    """Skip where this machine gives no user and mount namespaces."""
    probe = [*READ_ONLY, str(tmp_path), "touch", str(tmp_path / "x")]
    probe = subprocess.run(probe, capture_output=True)
    if b"Read-only file system" not in probe.stderr:
        pytest.skip(f"no read-only bind mounts here: {probe.stderr.decode().strip()}")


def test_unwritable_sessions_folder_gives_one_line(finished, tmp_path, read_only_mounts):
    paths = copy_of(finished, tmp_path)
    sessions = paths.root.parent
    send_command(paths, "budget", amount="+5evals")  # so that resume has budget to go on with
    read_only = [*READ_ONLY, str(sessions)]
    for args in (
        ["pin", "s", "c0001"],
        ["pause", "s"],
        ["resume", "s", "--headless"],
        ["run", "softmax", "--backend", "sim", "--session", "new", "--headless"],
    ):
        out = kb(*args, sessions=sessions, prefix=read_only)
        line = one_line(out)
        assert out.returncode == 1, line
        assert f"cannot write {sessions}/" in line and "Read-only file system" in line
        assert "--sessions-dir" in line
    under_a_file = tmp_path / "a-file"
    under_a_file.write_text("")
    out = kb("run", "softmax", "--backend", "sim", "--headless", sessions=under_a_file / "s")
    assert out.returncode == 1 and "Not a directory" in one_line(out)


def test_export_into_a_missing_folder_and_closed_pipes(finished, tmp_path):
    sessions = finished.root.parent
    out = kb("export", "s", "-o", str(tmp_path / "no" / "best.py"), sessions=sessions)
    assert out.returncode == 1
    assert "No such file or directory" in one_line(out) and "leave out -o" in out.stderr
    for argv in (["show", "s", "--sessions-dir", str(sessions)], ["problems"]):
        # The reader is gone before the command writes a byte: `kernelbrain show s | head -0`.
        proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 141 and err == "", err


def test_an_exported_kernel_runs_on_a_machine_without_a_gpu(finished, tmp_path):
    """Opened as it is, where neither a GPU nor TRITON_INTERPRET is (a fresh interpreter): the
    file picks Triton's interpreter itself and computes the reference's softmax."""
    exported = tmp_path / "best.py"
    assert kb("export", "s", "-o", exported, sessions=finished.root.parent).returncode == 0
    assert "Triton's interpreter runs it on the CPU" in exported.read_text()
    code = f"""
import importlib.util, torch
spec = importlib.util.spec_from_file_location("best", {str(exported)!r})
best = importlib.util.module_from_spec(spec)
spec.loader.exec_module(best)
x = torch.randn(4, 300)
print(torch.allclose(best.ModelNew()(x), torch.softmax(x, dim=1), atol=1e-6))
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0 and out.stdout.split() == ["True"], out.stderr


@pytest.mark.parametrize("budget", ["0evals", "0m", "$0", "0gpu-s", "", "-5evals", "-1m"])
def test_a_budget_of_nothing_is_a_usage_error(tmp_path, budget):
    out = kb("run", "softmax", "--backend", "sim", "--headless", "--budget", budget,
             "--session", "s", sessions=tmp_path)  # fmt: skip
    assert out.returncode == 2 and "30m" in one_line(out)
    assert not (tmp_path / "s").exists()


def test_budget_taken_away_is_a_usage_error_that_says_to_add(finished, tmp_path):
    out = kb("budget", "s", "-1m", sessions=copy_of(finished, tmp_path).root.parent)
    assert out.returncode == 2 and "must start with '+', e.g. +10m" in one_line(out)


@pytest.mark.parametrize("name", ["../escaped", "a/b", ".hidden", "", "{tmp}/absolute"])
def test_a_session_name_is_one_plain_folder_name(tmp_path, name):
    out = kb("run", "softmax", "--backend", "sim", "--headless", "--budget", "2evals",
             "--session", name.format(tmp=tmp_path), sessions=tmp_path / "sessions")  # fmt: skip
    line = one_line(out)
    assert out.returncode == 2 and "letters, digits, '.', '_' and '-'" in line
    assert list(tmp_path.iterdir()) == [], "a session was written"


def test_help_lists_deferred_commands_as_they_describe_themselves():
    """`--help` lists check and doctor without loading them (DEFERRED_COMMANDS): the same
    listing as when each is loaded."""
    from engine.cli import build_parser

    listed = build_parser().format_help()
    assert build_parser("check").format_help() == listed == build_parser("doctor").format_help()


def test_a_headless_run_ends_with_its_answer_on_stdout(tmp_path, monkeypatch):
    """Progress and status go to stderr; stdout holds only the answer: the best candidate that
    `show --json` names, its speedup with its interval and rung, and the commands to look at it
    and export it, which work as printed."""
    out = kb("run", "softmax", "--backend", "sim", "--seed", "0", "--budget", "12evals",
             "--session", "s", "--headless", sessions=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    best = json.loads(kb("show", "s", "--json", sessions=tmp_path).stdout)["best"]
    low, high = best["speedup_ci"]
    look, export = (f"kernelbrain {c} s --sessions-dir {tmp_path}" for c in ("show", "export"))
    assert out.stdout.splitlines() == [
        f"best {best['id']}: {best['speedup']:.2f}x [{low:.2f}, {high:.2f}] over PyTorch eager "
        f"at rung {best['rung']} (session s)",
        f"look:   {look}",
        f"export: {export} -o best.py",
    ]
    err = out.stderr.splitlines()
    assert err[0] == f"session s in {tmp_path}/s"
    assert err[-1] == "finished: budget spent: evaluations"
    assert err[1:-1] and all(line.startswith("[s step ") for line in err[1:-1]), err
    monkeypatch.chdir(tmp_path)
    shown = kernelbrain(*shlex.split(look)[1:])
    assert shown.returncode == 0 and f"best {best['id']} " in shown.stdout.splitlines()[0]
    assert kernelbrain(*shlex.split(export)[1:], "-o", "best.py").returncode == 0
    assert "class ModelNew" in (tmp_path / "best.py").read_text()


def test_json_gives_the_answer_as_one_line_and_resume_gives_it_too(tmp_path):
    """`--json` (headless by itself): the same facts as one JSON line on stdout, progress still
    on stderr; a resume of the spent session answers the same, in words or JSON."""
    out = kb("run", "softmax", "--backend", "sim", "--seed", "0", "--budget", "12evals",
             "--session", "s", "--json", sessions=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "no terminal for the TUI" not in out.stderr and "[s step " in out.stderr
    [line] = out.stdout.splitlines()
    answer = json.loads(line)
    assert answer == {
        "session": "s",
        "problem": "softmax",
        "backend": "sim",
        "state": "finished",
        "stop_reason": "budget spent: evaluations",
        "best": json.loads(kb("show", "s", "--json", sessions=tmp_path).stdout)["best"],
        "no_best": None,
        "timings_meaningful": True,
        "show": f"kernelbrain show s --sessions-dir {tmp_path}",
        "export": f"kernelbrain export s --sessions-dir {tmp_path} -o best.py",
    }
    again = kb("resume", "s", "--json", sessions=tmp_path)
    assert again.returncode == 0 and "spent its evaluations limit" in again.stderr
    assert json.loads(again.stdout) == answer
    words = kb("resume", "s", "--headless", sessions=tmp_path).stdout.splitlines()
    assert words[0].startswith(f"best {answer['best']['id']}: ") and len(words) == 3


def test_a_run_without_a_best_says_why_and_offers_no_export(tmp_path):
    """A session stopped before any candidate was timed: one line says there is no best and
    why; the JSON answer's best and export are null."""
    for name in ("s", "j"):
        paths = SessionPaths(tmp_path / name)
        create_session(paths, SessionSettings("softmax", "sim", 0, {"evaluations": 5}))
        send_command(paths, "stop")
    out = kb("resume", "s", "--headless", sessions=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "no best: no candidate was generated; stopped by the user (session s)",
        f"look:   kernelbrain show s --sessions-dir {tmp_path}",
    ]
    assert out.stderr.splitlines()[-1] == "stopped: stopped by the user"
    answer = json.loads(kb("resume", "j", "--json", sessions=tmp_path).stdout)
    assert (answer["best"], answer["export"], answer["state"]) == (None, None, "stopped")
    assert answer["no_best"] == "no candidate was generated; stopped by the user"


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """A softmax search on the cpu backend (Triton's interpreter), its device seconds limited
    as `device-s`: the headless run's output and the session."""
    sessions = tmp_path_factory.mktemp("cpu")
    out = kb("run", "softmax", "--backend", "cpu", "--budget", "2evals,600device-s",
             "--session", "c", "--headless", sessions=sessions)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out, SessionPaths(sessions / "c")


def test_a_cpu_session_counts_device_seconds_and_a_sim_one_gpu_seconds(cpu_run, finished, tmp_path):
    """On the cpu backend the progress lines, `show`, `ls` and the budget messages say device
    seconds (`600device-s` is read as the ledger's gpu_seconds, as `600gpu-s` is); on sim,
    which simulates a GPU, they say gpu-s."""
    out, paths = cpu_run
    assert "gpu" not in (out.stdout + out.stderr).lower()
    progress = [line for line in out.stderr.splitlines() if line.startswith("[c step ")]
    assert progress and all(" device-s | left: device_seconds " in line for line in progress)
    assert re.search(r" device-s \| left: device_seconds \d+, evaluations 0$", progress[-1])
    sessions = copy_of(paths, tmp_path / "cpu").root.parent
    shown = kb("show", "c", sessions=sessions).stdout
    assert " device-s | left: " in shown.splitlines()[0] and "gpu" not in shown.lower()
    assert " device-s, 2 evals" in kb("ls", sessions=sessions).stdout.splitlines()[1]
    out = kb("budget", "c", "+1m", sessions=sessions)
    assert "has no wall_seconds limit" in out.stderr and "device_seconds 600)" in out.stderr
    for amount in ("+5device-s", "+5gpu-s", "+1evals"):
        assert kb("budget", "c", amount, sessions=sessions).returncode == 0
    assert kb("resume", "c", "--headless", sessions=sessions).returncode == 0
    snap = read_snapshot(SessionPaths(sessions / "c"))
    assert snap["budget"]["limits"] == {"evaluations": 3, "gpu_seconds": 610}
    applied = [c["message"] for c in snap["commands"]]
    assert applied == ["budget device_seconds now 605", "budget device_seconds now 610",
                       "budget evaluations now 3"]  # fmt: skip

    out = kb("run", "softmax", "--backend", "cpu", "--budget", "0.01device-s", "--session", "d",
             "--headless", sessions=sessions)  # fmt: skip
    assert "finished: budget spent: device_seconds" in out.stderr  # the stop reason too

    sim = finished.root.parent
    assert " gpu-s | left: evaluations 0" in kb("show", "s", sessions=sim).stdout.splitlines()[0]
    assert " gpu-s, 12 evals" in kb("ls", sessions=sim).stdout.splitlines()[1]
    out = kb("budget", "s", "+5device-s", sessions=copy_of(finished, tmp_path / "sim").root.parent)
    assert "has no gpu_seconds limit" in out.stderr
