"""The session's engine lock as clients read it: a running engine's heartbeat never leaves the
lock's text empty or half written, so `ls` and `show` never call a running session interrupted."""

import threading

from engine.session.lock import EngineLock
from engine.session_files import SessionPaths, engine_running


def test_a_heartbeat_never_shows_a_running_engine_as_gone(tmp_path):
    paths = SessionPaths(tmp_path / "s")
    paths.root.mkdir()
    lock = EngineLock(paths)
    lock.acquire()
    done = threading.Event()

    def beat() -> None:
        for _ in range(20000):
            lock.heartbeat()
        done.set()

    threading.Thread(target=beat, daemon=True).start()
    seen_gone = 0
    while not done.is_set():
        seen_gone += not engine_running(paths)
    lock.release()
    assert seen_gone == 0
    assert not engine_running(paths)  # released: no engine holds it
