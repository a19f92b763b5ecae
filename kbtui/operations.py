"""What the TUI does outside the inbox protocol: export a candidate."""

from __future__ import annotations

from pathlib import Path

from engine.session_files import SessionPaths, exported_source


def export_target(paths: SessionPaths, candidate_id: str) -> Path:
    """Where `e` writes a candidate: <session folder>/<session>_<id>.py, wherever the TUI was
    started, so that the export lies beside the search that found it."""
    return paths.root / f"{paths.name}_{candidate_id}.py"


def export_candidate(paths: SessionPaths, candidate_id: str) -> Path:
    """Write the candidate to export_target, a standalone KernelBench file; returns its path."""
    target = export_target(paths, candidate_id)
    target.write_text(exported_source(paths, candidate_id))
    return target
