"""The one way the engine reads its judge and the judge reads its runners and their template: a
child process's replies, one JSON object a line, and the tail of its stderr, each read to its end
by a thread of its own into this channel's own queue and deque. A channel serves one process, so
the end of a killed process's output never reaches its successor's channel as a death."""

from __future__ import annotations

import collections
import json
import queue
import threading
from typing import TextIO

STDERR_TAIL_LINES = 40
# A reply line longer than this is not a reply: the process is lying or broken.
REPLY_LIMIT = 1 << 20
# A line that is no JSON object: what `receive` answers for it.
MALFORMED = "malformed"


class StderrTail:
    """The last lines of a process's stderr (each cut to 500 characters), read until its end."""

    def __init__(self, stream: TextIO, lines: int = STDERR_TAIL_LINES):
        self.lines: collections.deque[str] = collections.deque(maxlen=lines)
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream: TextIO) -> None:
        try:
            for line in stream:
                self.lines.append(line.rstrip()[:500])
        except (OSError, ValueError):
            pass  # closed under the reader: the process is gone
        finally:
            stream.close()

    def text(self, last: int = 12, wait_s: float = 0.0) -> str:
        """The last `last` lines, after waiting up to `wait_s` for the end of the output (a dead
        process's last words)."""
        if wait_s:
            self._reader.join(timeout=wait_s)
        return "\n".join(list(self.lines)[-last:])


class ReplyChannel:
    """A process's replies and its stderr tail (`tail`)."""

    def __init__(self, replies: TextIO, stderr: TextIO):
        self.tail = StderrTail(stderr)
        self._replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(replies,), daemon=True).start()

    def _read(self, replies: TextIO) -> None:
        try:
            for line in replies:
                self._replies.put(line[:REPLY_LIMIT])
        except (UnicodeDecodeError, OSError, ValueError):
            pass  # bytes that are no reply, or closed under the reader: the process is done
        finally:
            replies.close()
            self._replies.put(None)

    def receive(self, timeout: float) -> dict | str | None:
        """The next reply: a dict, MALFORMED for a line that is no JSON object, or None once the
        process's output has ended. TimeoutError past `timeout` seconds."""
        try:
            line = self._replies.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            self._replies.put(None)  # ended: every later receive says so too
            return None
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            return MALFORMED
        return reply if isinstance(reply, dict) else MALFORMED
