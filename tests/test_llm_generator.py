"""The LLM generator through the real litellm client against a scripted OpenAI-compatible server
on 127.0.0.1: candidates, repairs, retries, timeouts, concurrency, tokens, cost, reply reuse."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from llm_server import (
    GARBAGE_REPLY,
    GOOD_REPLY,
    MISSING_IMPORTS_REPLY,
    PROSE_AND_FENCES_REPLY,
    SOFTMAX_KERNEL,
    WRONG_SIGNATURE_REPLY,
    Reply,
    ScriptedLLMServer,
    Status,
)

from engine.generate.base import GenerationRequest, GeneratorError
from engine.generate.llm import LLMGenerator, load_litellm
from engine.generate.prompt import build_prompt, prompt_sha256
from engine.jobs import source_sha256
from engine.problems import load_problem

MODEL = "openai/gpt-4o-mini"


class DictReplyStore(dict):
    """A ReplyStore in memory (the session's DuckDB store is tested with the engine)."""

    def put(self, prompt_sha256: str, reply: dict) -> None:
        self[prompt_sha256] = reply


@pytest.fixture(autouse=True)
def offline_litellm(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


def generator(server: ScriptedLLMServer, model: str = MODEL, **options) -> LLMGenerator:
    options = {"backoff_s": 0.01, "timeout_s": 30.0, "concurrency": 1, **options}
    gen = LLMGenerator(model, api_base=server.url, **options)
    gen.preflight()
    return gen


def request(problem, count: int, **fields) -> GenerationRequest:
    return GenerationRequest(problem, "coarse", count, random.Random(0), **fields)


def price_of(tokens_in: int, tokens_out: int) -> float:
    price = load_litellm().model_cost["gpt-4o-mini"]
    return tokens_in * price["input_cost_per_token"] + tokens_out * price["output_cost_per_token"]


def test_replies_become_repaired_candidates_with_tokens_and_cost(softmax):
    script = [
        Reply(GOOD_REPLY),
        Reply(PROSE_AND_FENCES_REPLY),
        Reply(MISSING_IMPORTS_REPLY),
        Reply(WRONG_SIGNATURE_REPLY),
        Reply(GARBAGE_REPLY, prompt_tokens=1000, completion_tokens=20),
    ]
    with ScriptedLLMServer(script) as server:
        outcome = generator(server).propose(request(softmax, 5))
    assert outcome.requests == len(server.chat_requests) == 5
    sent = server.chat_requests[0]["body"]
    assert sent["model"] == "gpt-4o-mini"
    assert sent["messages"] == build_prompt(request(softmax, 5))
    # The good, the prose-wrapped and the import-less replies repair to the same module.
    assert [p.source for p in outcome.proposals][0] == SOFTMAX_KERNEL
    assert len(outcome.proposals) == 2
    assert all(p.origin == "llm" for p in outcome.proposals)
    assert [r["reason"] for r in outcome.rejections] == ["duplicate", "duplicate", "no_code"]
    assert [r.split(":")[0] for r in outcome.repairs] == ["reply 1", "reply 2", "reply 3"]
    assert "`inp` is now Model's `x`" in outcome.proposals[1].note
    assert (outcome.tokens_in, outcome.tokens_out) == (5000, 4 * 500 + 20)
    assert outcome.cost_usd == pytest.approx(price_of(5000, 2020))
    assert outcome.cost_usd > 0 and outcome.notes == []


def test_a_rate_limit_is_retried_and_counted(softmax):
    with ScriptedLLMServer([Status(429), Reply(GOOD_REPLY)]) as server:
        outcome = generator(server, max_retries=3).propose(request(softmax, 1))
    assert outcome.requests == len(server.chat_requests) == 2
    assert [p.source for p in outcome.proposals] == [SOFTMAX_KERNEL]
    assert outcome.rejections == []
    assert outcome.tokens_in == 1000  # the failed attempt costs nothing


def test_server_errors_are_retried_until_the_retries_give_up(softmax):
    with ScriptedLLMServer([Status(500)]) as server:
        outcome = generator(server, max_retries=2).propose(request(softmax, 1))
    assert outcome.requests == len(server.chat_requests) == 3
    assert outcome.proposals == []
    assert [r["reason"] for r in outcome.rejections] == ["llm_unavailable"]
    assert "after 3 attempt(s)" in outcome.rejections[0]["message"]
    assert (outcome.tokens_in, outcome.cost_usd) == (0, 0.0)


def test_a_reply_slower_than_the_timeout_is_retried_then_rejected(softmax):
    slow_s = 30.0  # far beyond two 0.5 s timeouts and their backoff, even on a loaded machine
    with ScriptedLLMServer([Reply(GOOD_REPLY, delay_s=slow_s)]) as server:
        started = time.monotonic()
        outcome = generator(server, timeout_s=0.5, max_retries=1).propose(request(softmax, 1))
        elapsed = time.monotonic() - started
    assert outcome.requests == len(server.chat_requests) == 2
    assert [r["reason"] for r in outcome.rejections] == ["llm_timeout"]
    assert outcome.proposals == []
    assert elapsed < slow_s / 2  # it did not wait for the slow reply


def test_a_bad_request_is_not_retried(softmax):
    with ScriptedLLMServer([Status(400, "prompt too long")]) as server:
        outcome = generator(server, max_retries=3).propose(request(softmax, 1))
    assert outcome.requests == len(server.chat_requests) == 1
    assert [r["reason"] for r in outcome.rejections] == ["llm_request_failed"]
    assert "prompt too long" in outcome.rejections[0]["message"]


def test_a_rejected_key_stops_generation_without_retrying(softmax):
    with ScriptedLLMServer([Status(401, "invalid api key")]) as server:
        with pytest.raises(GeneratorError, match="refused the request.*invalid api key"):
            generator(server, max_retries=3).propose(request(softmax, 1))
    assert len(server.chat_requests) == 1


def test_requests_in_flight_never_exceed_the_concurrency_limit(softmax):
    """Two propose calls at once (say, two promoted parents) share the generator's limit."""
    with ScriptedLLMServer([Reply(GOOD_REPLY, delay_s=0.3)]) as server:
        gen = generator(server, concurrency=2)
        with ThreadPoolExecutor(max_workers=2) as callers:
            outcomes = list(callers.map(lambda _: gen.propose(request(softmax, 3)), range(2)))
    assert sum(o.requests for o in outcomes) == len(server.chat_requests) == 6
    assert server.max_in_flight == 2
    assert [len(o.proposals) for o in outcomes] == [1, 1]  # equal replies: one candidate each


def test_stored_replies_are_reused_instead_of_asked_again(softmax):
    store = DictReplyStore()
    script = [Reply(GOOD_REPLY), Reply(WRONG_SIGNATURE_REPLY), Reply(GARBAGE_REPLY)]
    with ScriptedLLMServer(script) as server:
        first = generator(server).propose(request(softmax, 3, replies=store))
    prompt_hash = prompt_sha256(build_prompt(request(softmax, 3)))
    assert sorted(store) == [f"{prompt_hash}:{i}" for i in range(3)]
    assert store[f"{prompt_hash}:2"]["content"] == GARBAGE_REPLY  # stored although rejected
    assert store[f"{prompt_hash}:0"]["tokens_in"] == 1000

    with ScriptedLLMServer([Status(500)]) as resumed_server:  # a resumed run, a fresh generator
        again = generator(resumed_server).propose(request(softmax, 3, replies=store))
    assert resumed_server.chat_requests == []
    assert [p.source for p in again.proposals] == [p.source for p in first.proposals]
    # No request is made; the stored cost is counted, since the run that paid for it died
    # before its checkpoint counted it.
    assert again.requests == 0
    assert (again.tokens_in, again.cost_usd) == (first.tokens_in, first.cost_usd)
    assert again.notes == ["reused 3 stored LLM replies"]


def test_the_dollar_budget_stops_generation(softmax):
    one_reply = price_of(1000, 500)
    with ScriptedLLMServer([Reply(GOOD_REPLY), Reply(WRONG_SIGNATURE_REPLY)]) as server:
        gen = generator(server)
        spent = gen.propose(request(softmax, 2, budget_usd_left=0.0))
        assert (spent.requests, spent.proposals) == (0, [])
        assert spent.notes == ["LLM dollar budget spent: 2 request(s) not made"]
        partial = gen.propose(request(softmax, 3, budget_usd_left=1.5 * one_reply))
    assert partial.requests == len(server.chat_requests) == 2
    assert partial.cost_usd == pytest.approx(2 * one_reply)
    assert partial.notes == ["LLM dollar budget spent: 1 request(s) not made"]


def test_a_model_without_a_known_price_costs_zero_with_a_note(softmax):
    with ScriptedLLMServer([Reply(GOOD_REPLY)]) as server:
        outcome = generator(server, model="openai/kb-local-model").propose(request(softmax, 1))
    assert outcome.cost_usd == 0.0 and outcome.tokens_in == 1000
    assert outcome.notes == [
        "litellm knows no price for openai/kb-local-model: its cost counts as $0"
    ]
    assert len(outcome.proposals) == 1


def test_candidates_already_known_are_not_proposed_again(softmax):
    known = frozenset({source_sha256(SOFTMAX_KERNEL)})
    with ScriptedLLMServer([Reply(GOOD_REPLY)]) as server:
        outcome = generator(server).propose(request(softmax, 1, known_sha256=known))
    assert outcome.proposals == []
    assert [r["reason"] for r in outcome.rejections] == ["duplicate"]
