"""The tree stays linted: ruff's rules from pyproject.toml over every Python file."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
