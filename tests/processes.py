"""The process tree as /proc shows it, for tests that watch judges and runners come and go."""

from pathlib import Path


def parents() -> dict[int, int]:
    """pid -> parent pid of every process now."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def descendants(root: int) -> set[int]:
    tree, found, frontier = parents(), set(), {root}
    while frontier:
        frontier = {pid for pid, parent in tree.items() if parent in frontier} - found
        found |= frontier
    return found


def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if _running(pid)}


def _running(pid: int) -> bool:
    """Neither gone nor a zombie; a process may go while its stat is read (ESRCH)."""
    try:
        return " Z " not in (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
