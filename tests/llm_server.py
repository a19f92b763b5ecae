"""An OpenAI-compatible chat-completions server on 127.0.0.1 that replies from a script.

Tests point the real litellm client at it (`api_base=server.url`). Each chat request takes the
next behaviour of the script; the last one repeats once the script is used up. The server
records every request it receives, so tests can count retries and check concurrency.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    """A successful completion whose message content is `content`."""

    content: str
    prompt_tokens: int = 1000
    completion_tokens: int = 500
    delay_s: float = 0.0  # wait this long before answering (slower than a client timeout)


@dataclass(frozen=True)
class Status:
    """An HTTP error with an OpenAI-style error body (429, 500, 401, 400, ...)."""

    code: int
    message: str = "scripted error"


class ScriptedLLMServer:
    """A real HTTP server in a thread: `with ScriptedLLMServer([...]) as server: server.url`."""

    def __init__(self, script: list[Reply | Status], model_ids: tuple[str, ...] = ("gpt-4o-mini",)):
        if not script:
            raise ValueError("the script needs at least one behaviour")
        self.script = list(script)
        self.model_ids = model_ids
        self.requests: list[dict] = []  # {"path", "body", "behaviour"} in arrival order
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _next_behaviour(self, path: str, body: dict) -> Reply | Status:
        with self._lock:
            index = len(self.chat_requests)
            behaviour = self.script[min(index, len(self.script) - 1)]
            self.requests.append({"path": path, "body": body, "behaviour": behaviour})
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        return behaviour

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def send_json(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    with server._lock:
                        server.requests.append({"path": self.path, "body": None, "behaviour": None})
                    models = [
                        {"id": m, "object": "model", "owned_by": "test"} for m in server.model_ids
                    ]
                    self.send_json(200, {"object": "list", "data": models})
                else:
                    self.send_json(404, error_body(404, f"no route {self.path}"))

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self.send_json(404, error_body(404, f"no route {self.path}"))
                    return
                behaviour = server._next_behaviour(self.path, body)
                try:
                    if isinstance(behaviour, Status):
                        self.send_json(
                            behaviour.code, error_body(behaviour.code, behaviour.message)
                        )
                        return
                    time.sleep(behaviour.delay_s)
                    self.send_json(200, completion_body(body.get("model", "?"), behaviour))
                finally:
                    server._done()

        return Handler


def error_body(code: int, message: str) -> dict:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
    return {"error": {"message": message, "type": kinds.get(code, "server_error"), "code": code}}


def completion_body(model: str, reply: Reply) -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1764480000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


# Canned reply texts, shared by the repair and generator tests (softmax over dim 1).

SOFTMAX_KERNEL = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    """One program per row: the whole row in one block, max-subtracted for stability."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * stride_y + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        softmax_rows[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block)
        return y
'''

GOOD_REPLY = f"```python\n{SOFTMAX_KERNEL}```\n"

# Prose, a shell block, an early draft without a kernel, then the final answer.
PROSE_AND_FENCES_REPLY = f"""\
Here is my plan. First install Triton:

```bash
pip install triton
```

A first draft that only wraps PyTorch:

```python
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x.softmax(dim=1)
```

That draft calls the operator we replace, so here is the real kernel:

```py
{SOFTMAX_KERNEL}```

It uses one program per row.
"""

MISSING_IMPORTS_REPLY = "```python\n" + SOFTMAX_KERNEL.split("\n\n\n", 1)[1] + "```\n"

WRONG_SIGNATURE_REPLY = (
    "```python\n"
    + SOFTMAX_KERNEL.replace(
        "def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = x.contiguous()",
        "def forward(self, inp, scale=1.0):\n        x = inp.contiguous()",
    )
    + "```\n"
)

GARBAGE_REPLY = "I'm sorry, I can't help with writing GPU kernels today."
