"""The LLM generator's preflight: a missing key, an unknown model or an unreachable --api-base
is a clear error before any request is paid for, never a fallback to something else."""

from __future__ import annotations

import socket

import pytest
from llm_server import GOOD_REPLY, Reply, ScriptedLLMServer

from engine.generate.base import GeneratorError
from engine.generate.llm import LLMGenerator


@pytest.fixture(autouse=True)
def offline_litellm(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")


@pytest.fixture()
def server():
    with ScriptedLLMServer([Reply(GOOD_REPLY)]) as running:
        yield running


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_reachable_server_with_a_key_passes_and_is_not_asked_for_a_completion(server):
    LLMGenerator("openai/gpt-4o-mini", api_base=server.url).preflight()
    assert [r["path"] for r in server.requests] == ["/v1/models"]


def test_a_known_hosted_model_with_its_key_passes_without_any_request(monkeypatch):
    """No network here: any request to the provider would fail the preflight."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-dummy")
    LLMGenerator("anthropic/claude-sonnet-4-5").preflight()


def test_a_missing_api_key_names_the_variable_to_set(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(GeneratorError, match="no API key for openai .*set OPENAI_API_KEY"):
        LLMGenerator("openai/gpt-4o-mini", api_base=server.url).preflight()
    assert server.chat_requests == []


def test_a_missing_key_of_another_provider_is_named_too(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(GeneratorError, match="set ANTHROPIC_API_KEY"):
        LLMGenerator("anthropic/claude-sonnet-4-5").preflight()


def test_a_model_without_a_provider_is_unknown():
    with pytest.raises(GeneratorError, match="unknown model 'kb-no-such-model'.*provider/model"):
        LLMGenerator("kb-no-such-model").preflight()


def test_a_model_litellm_does_not_know_needs_an_api_base():
    with pytest.raises(GeneratorError, match="unknown model 'openai/kb-no-such-model'.*--api-base"):
        LLMGenerator("openai/kb-no-such-model").preflight()


def test_an_unreachable_api_base_is_an_error():
    api_base = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(GeneratorError, match=f"cannot reach --api-base {api_base}"):
        LLMGenerator("openai/kb-local-model", api_base=api_base).preflight()


def test_an_api_base_that_is_not_a_url_says_how_to_write_one():
    with pytest.raises(GeneratorError, match="not a URL: write it like http://"):
        LLMGenerator("openai/kb-local-model", api_base="localhost:8000").preflight()


def test_a_server_answering_with_an_error_status_is_reachable(server):
    """Any HTTP answer proves the server is there (an auth-only /models gives 401 or 404)."""
    LLMGenerator("openai/kb-local-model", api_base=server.url + "/not-here").preflight()
    assert [r["path"] for r in server.requests] == ["/v1/not-here/models"]


def test_impossible_limits_are_refused():
    with pytest.raises(ValueError, match="concurrency >= 1"):
        LLMGenerator("openai/gpt-4o-mini", concurrency=0)
