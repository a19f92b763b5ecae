"""The channel the engine reads its judge on and the judge its runners (engine.worker.channel),
with real child processes: replies as dicts, anything else as MALFORMED, the end of output once
and for good, a deadline, the stderr tail to its last words, and a successor never told of its
predecessor's death."""

import subprocess
import sys
import textwrap

import pytest

from engine.worker.channel import MALFORMED, REPLY_LIMIT, ReplyChannel


def child(script: str) -> tuple[subprocess.Popen, ReplyChannel]:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    return proc, ReplyChannel(proc.stdout, proc.stderr)


def test_replies_come_as_dicts_and_anything_else_as_malformed():
    proc, channel = child(f"""
        import sys
        print('{{"a": 1}}'); print("not json"); print("[1, 2]"); print("x" * {REPLY_LIMIT + 10})
        print('{{"b": 2}}', flush=True)
        sys.stderr.write("".join(f"line {{i}}\\n" for i in range(60)))
    """)
    received = [channel.receive(30) for _ in range(7)]
    assert received == [{"a": 1}, MALFORMED, MALFORMED, MALFORMED, {"b": 2}, None, None]
    proc.wait()
    last = channel.tail.text(wait_s=5).splitlines()
    assert last == [f"line {i}" for i in range(48, 60)]  # the last words, to the end


def test_a_reply_that_does_not_come_is_a_timeout():
    proc, channel = child("import time; time.sleep(30)")
    try:
        with pytest.raises(TimeoutError):
            channel.receive(0.3)
    finally:
        proc.kill()
        proc.wait()
    assert channel.receive(5) is None  # killed: its output ended


def test_a_killed_process_s_end_never_reaches_its_successor():
    first, first_channel = child("import time; time.sleep(30)")
    first.kill()
    second, second_channel = child("""
        import time
        time.sleep(0.5)
        print('{"ready": true}', flush=True)
    """)
    try:
        assert second_channel.receive(30) == {"ready": True}
        assert first_channel.receive(5) is None
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait()
