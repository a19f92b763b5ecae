"""The TUI imports neither torch nor triton; the engine imports no Textual (checked in fresh
interpreters, so nothing imported by other tests can hide a violation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def modules_after(imports: str) -> set[str]:
    code = f"import sys, {imports}; print('\\n'.join(sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


def test_tui_imports_neither_torch_nor_triton():
    loaded = modules_after("kbtui.app, engine.cli.attach")
    assert "kbtui.app" in loaded
    assert not {"torch", "triton", "duckdb"} & loaded


def test_engine_imports_no_textual():
    loaded = modules_after("engine.cli, engine.session_files, engine.jobs, engine.problems")
    assert "engine.problems" in loaded
    assert not {m for m in loaded if m == "textual" or m.startswith("textual.")}
