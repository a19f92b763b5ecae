"""The LLM generator inside the real engine: a real `kernelbrain run` on the cpu backend, the real
litellm client, and an OpenAI-compatible server on 127.0.0.1 with scripted replies."""

import json
import os
import subprocess
import sys

import pytest
from llm_server import (
    GARBAGE_REPLY,
    GOOD_REPLY,
    MISSING_IMPORTS_REPLY,
    PROSE_AND_FENCES_REPLY,
    Reply,
    ScriptedLLMServer,
    Status,
)

from engine.session_files import SessionPaths, read_events

CLI = [sys.executable, "-m", "engine.cli"]
# A search of the built-in softmax on the cpu backend with an OpenAI model through litellm.
LLM_RUN = "run softmax --backend cpu --generator llm --model openai/gpt-4o-mini --headless".split()


def kb(args, sessions, env):
    return subprocess.run(
        [*CLI, *args, "--sessions-dir", str(sessions)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def llm_env():
    return {**os.environ, "OPENAI_API_KEY": "sk-test-dummy", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@pytest.mark.slow
def test_engine_with_llm_generator_on_cpu(tmp_path):
    script = [
        Status(429),
        Reply(GOOD_REPLY),
        Reply(PROSE_AND_FENCES_REPLY),
        Reply(MISSING_IMPORTS_REPLY),
        Reply(GARBAGE_REPLY),
    ]
    with ScriptedLLMServer(script) as server:
        run = kb(
            [*LLM_RUN, "--api-base", server.url, "--budget", "3evals", "--session", "llm"],
            tmp_path,
            llm_env(),
        )
        requests = server.chat_requests
    assert run.returncode == 0, run.stderr
    show = json.loads(kb(["show", "llm", "--json"], tmp_path, llm_env()).stdout)
    llm_candidates = [c for c in show["candidates"] if c["origin"] == "llm"]
    # The good kernel, its copy inside prose and fences, and the copy missing its imports are
    # one source after repair: one candidate, evaluated once, and it passes the gate.
    assert len(llm_candidates) >= 1
    assert any(c["status"] not in ("rejected", "queued") for c in llm_candidates)
    assert len({c["sha256"] for c in show["candidates"]}) == len(show["candidates"])
    # The 429 was retried: more requests than successful replies.
    answered = [r for r in requests if isinstance(r["behaviour"], Reply)]
    assert requests[0]["behaviour"] == Status(429) and len(answered) >= 4
    ledger = show["ledger"]
    assert ledger["llm_tokens_in"] == 1000 * len(answered)
    assert ledger["llm_tokens_out"] == 500 * len(answered)
    assert ledger["llm_cost_usd"] > 0
    events = read_events(SessionPaths(tmp_path / "llm"))
    assert any(e["kind"] == "generation_rejected" for e in events)  # the garbage reply
    assert any(e["kind"] == "generation_note" and "import" in e["message"] for e in events)


def test_missing_key_fails_before_any_budget_is_spent(tmp_path):
    env = {k: v for k, v in llm_env().items() if k != "OPENAI_API_KEY"}
    run = kb(
        [*LLM_RUN, "--session", "nokey"],
        tmp_path,
        env,
    )
    assert run.returncode == 2 and "OPENAI_API_KEY" in run.stderr
    assert not (tmp_path / "nokey").exists()
