"""What the TUI does outside the inbox protocol: export a candidate."""

from __future__ import annotations

from pathlib import Path

from engine.session_files import SessionPaths, exported_source


def export_candidate(paths: SessionPaths, candidate_id: str, directory: Path) -> Path:
    """Write the candidate to <directory>/<session>_<id>.py, a standalone KernelBench file."""
    target = directory / f"{paths.name}_{candidate_id}.py"
    target.write_text(exported_source(paths, candidate_id))
    return target
