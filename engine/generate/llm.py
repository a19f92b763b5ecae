"""The LLM generator: asks any model that litellm supports for candidates, through the prompt
builder and the parser/repair step. It only produces source text: nothing it receives runs here.

Every raw reply goes into the session's ReplyStore (keyed by prompt hash and index) before it
is parsed, and a stored reply is reused instead of asking again, so a resumed run never pays
twice for the same answer.
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import tenacity

from engine.generate.base import (
    GenerationOutcome,
    GenerationRequest,
    GeneratorError,
    Proposal,
    ReplyStore,
)
from engine.generate.prompt import build_prompt, prompt_sha256
from engine.generate.repair import extract_candidate
from engine.jobs import source_sha256

log = logging.getLogger(__name__)

# Replies asked for when the engine asks for "one per strategy" (count 0): the coarse round.
COARSE_REPLIES = 4

DEFAULT_TIMEOUT_S = 300.0  # a slow model writing a long kernel can take minutes
DEFAULT_MAX_RETRIES = 4  # after the first attempt, for rate limits, timeouts and 5xx
DEFAULT_CONCURRENCY = 4  # requests in flight at once; providers rate-limit bursts
DEFAULT_BACKOFF_S = 2.0  # first retry wait; doubles each retry
MAX_BACKOFF_S = 60.0
REACHABILITY_TIMEOUT_S = 5.0


# Reason codes of LLM-side rejections (the parser's own are in engine.generate.repair.REASONS).
def load_litellm():
    """Import litellm on first use, offline: no price-map download, no telemetry."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:
        raise GeneratorError(
            "the LLM generator needs litellm: pip install litellm (or use --generator offline)"
        ) from exc
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, timeouts, connection drops and server errors (not 4xx)."""
    litellm = load_litellm()
    if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 429) or status >= 500)


def is_fatal(exc: BaseException) -> bool:
    """No later request can succeed either: a bad key, no permission, no such model."""
    litellm = load_litellm()
    return isinstance(
        exc, (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError)
    )


@dataclass
class Answer:
    """What asking (or the store) gave for one reply index."""

    key: str
    reply: dict | None = None  # {"content", "model", "tokens_in", "tokens_out", "cost_usd", ...}
    reused: bool = False  # taken from the ReplyStore: no request made
    attempts: int = 0  # HTTP requests made, retries included
    error: dict | None = None  # {"reason", "message"} when every attempt failed
    skipped: bool = False  # not asked: the dollar budget was spent


class DollarBudget:
    """Dollars spent by one `propose` call against what the caller has left (thread-safe)."""

    def __init__(self, left_usd: float | None):
        self.left_usd = left_usd
        self.spent_usd = 0.0
        self._lock = threading.Lock()

    def allows_another(self) -> bool:
        with self._lock:
            return self.left_usd is None or self.spent_usd < self.left_usd

    def spend(self, usd: float) -> None:
        with self._lock:
            self.spent_usd += usd


class LLMGenerator:
    """Candidates from an LLM through litellm (any provider; local servers via `api_base`)."""

    name = "llm"

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        concurrency: int = DEFAULT_CONCURRENCY,
        backoff_s: float = DEFAULT_BACKOFF_S,
    ):
        if timeout_s <= 0 or max_retries < 0 or concurrency < 1 or backoff_s < 0:
            raise ValueError(
                "LLMGenerator needs timeout_s > 0, max_retries >= 0, concurrency >= 1 and "
                "backoff_s >= 0"
            )
        self.model = model
        self.api_base = api_base
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self._slots = threading.BoundedSemaphore(concurrency)

    # ------------------------------------------------------------ preflight

    def preflight(self) -> None:
        """Fail now, before any budget is spent, if the model, its key or its server is missing."""
        litellm = load_litellm()
        try:
            _, provider, _, default_base = litellm.get_llm_provider(
                self.model, api_base=self.api_base
            )
        except Exception as exc:
            raise GeneratorError(
                f"unknown model {self.model!r}: litellm cannot tell which provider serves it. "
                "Write it as provider/model, e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5 "
                "or ollama/llama3 (providers: https://docs.litellm.ai/docs/providers)"
            ) from exc
        if self.api_base is None and not self._model_is_mapped(litellm):
            raise GeneratorError(
                f"unknown model {self.model!r}: litellm has no model of that name for provider "
                f"{provider}. Check the spelling, or pass --api-base if an OpenAI-compatible "
                "server of yours serves it"
            )
        missing = litellm.validate_environment(self.model, api_base=self.api_base)["missing_keys"]
        if missing:
            hint = " (a local server that needs no key accepts any value)" if self.api_base else ""
            raise GeneratorError(
                f"no API key for {provider} (model {self.model}): set "
                f"{' and '.join(missing)} in the environment{hint}"
            )
        base = self.api_base or default_base
        if base:
            check_reachable(base)

    def _model_is_mapped(self, litellm) -> bool:
        try:
            litellm.get_model_info(self.model)
        except Exception:
            return False
        return True

    # ------------------------------------------------------------ proposing

    def propose(self, request: GenerationRequest) -> GenerationOutcome:
        messages = build_prompt(request)
        prompt_hash = prompt_sha256(messages)
        budget = DollarBudget(request.budget_usd_left)
        count = request.count or COARSE_REPLIES
        keys = [f"{prompt_hash}:{index}" for index in range(count)]
        workers = max(1, min(self.concurrency, count))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm") as pool:
            futures = [
                pool.submit(self._answer, key, messages, request.replies, budget) for key in keys
            ]
            answers = [future.result() for future in futures]
        return self._outcome(answers, request)

    def _answer(
        self, key: str, messages: list[dict], store: ReplyStore | None, budget: DollarBudget
    ) -> Answer:
        stored = store.get(key) if store is not None else None
        if stored is not None:
            return Answer(key, reply=stored, reused=True)
        if not budget.allows_another():
            return Answer(key, skipped=True)
        answer = self._ask(key, messages)
        if answer.reply is not None:
            budget.spend(answer.reply["cost_usd"] or 0.0)
            if store is not None:
                store.put(key, answer.reply)  # committed before anyone parses it
        return answer

    def _ask(self, key: str, messages: list[dict]) -> Answer:
        """One completion, retried with exponential backoff on transient errors."""
        litellm = load_litellm()
        answer = Answer(key)

        def attempt():
            answer.attempts += 1
            with self._slots:
                return litellm.completion(
                    model=self.model,
                    messages=messages,
                    api_base=self.api_base,
                    timeout=self.timeout_s,
                    max_retries=0,  # retries are ours (tenacity), not the provider SDK's
                    num_retries=0,
                )

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            wait=tenacity.wait_exponential(multiplier=self.backoff_s, max=MAX_BACKOFF_S),
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            before_sleep=lambda state: log.warning(
                "LLM request failed (%s), retry %d", state.outcome.exception(), state.attempt_number
            ),
            reraise=True,
        )
        try:
            response = retrying(attempt)
        except Exception as exc:
            if is_fatal(exc):
                raise GeneratorError(
                    f"{self.model} refused the request ({type(exc).__name__}): {exc}. "
                    "Check the API key, its permissions and the model name"
                ) from exc
            answer.error = request_failure(exc, answer.attempts, litellm)
            return answer
        answer.reply = reply_record(response, self.model, litellm)
        return answer

    def _outcome(self, answers: list[Answer], request: GenerationRequest) -> GenerationOutcome:
        outcome = GenerationOutcome()
        seen = set(request.known_sha256)
        for index, answer in enumerate(answers):
            outcome.requests += answer.attempts
            if answer.error is not None:
                outcome.rejections.append({**answer.error, "reply": answer.key})
            if answer.reply is None:
                continue
            # A stored reply is reused only when the step that paid for it never reached its
            # checkpoint, so the ledger has not counted it yet: count it now.
            outcome.tokens_in += answer.reply["tokens_in"]
            outcome.tokens_out += answer.reply["tokens_out"]
            outcome.cost_usd += answer.reply["cost_usd"] or 0.0
            source, repairs, rejection = extract_candidate(answer.reply["content"], request.problem)
            outcome.repairs.extend(f"reply {index}: {repair}" for repair in repairs)
            if rejection is not None:
                outcome.rejections.append({**rejection, "reply": answer.key})
                continue
            sha = source_sha256(source)
            if sha in seen:
                outcome.rejections.append(
                    {
                        "reason": "duplicate",
                        "message": f"reply {index} repeats a candidate already generated or vetoed",
                        "reply": answer.key,
                    }
                )
                continue
            seen.add(sha)
            repaired = f", repaired: {'; '.join(repairs)}" if repairs else ""
            outcome.proposals.append(
                Proposal(source, origin="llm", note=f"{self.model} reply {index}{repaired}")
            )
        outcome.notes.extend(self._notes(answers))
        return outcome

    def _notes(self, answers: list[Answer]) -> list[str]:
        notes = []
        reused = sum(a.reused for a in answers)
        if reused:
            notes.append(f"reused {reused} stored LLM repl{'y' if reused == 1 else 'ies'}")
        skipped = sum(a.skipped for a in answers)
        if skipped:
            notes.append(f"LLM dollar budget spent: {skipped} request(s) not made")
        if any(a.reply and not a.reused and a.reply["cost_usd"] is None for a in answers):
            notes.append(f"litellm knows no price for {self.model}: its cost counts as $0")
        return notes


def check_reachable(api_base: str) -> None:
    """Any HTTP answer from `{api_base}/models` will do; no answer at all is an error."""
    parts = urllib.parse.urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise GeneratorError(
            f"--api-base {api_base!r} is not a URL: write it like http://127.0.0.1:8000/v1"
        )
    try:
        url = api_base.rstrip("/") + "/models"
        with urllib.request.urlopen(url, timeout=REACHABILITY_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        return  # it answered (401, 404, ...): the server is there
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise GeneratorError(
            f"cannot reach --api-base {api_base}: {reason}. Start the server or fix the address"
        ) from exc


def reply_record(response, model: str, litellm) -> dict:
    """The raw reply as stored: its text, token counts and cost (None when litellm has no price)."""
    usage = getattr(response, "usage", None)
    try:
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:
        cost = None
    choice = response.choices[0]
    return {
        "content": choice.message.content or "",
        "model": getattr(response, "model", None) or model,
        "finish_reason": choice.finish_reason,
        "tokens_in": getattr(usage, "prompt_tokens", 0) or 0,
        "tokens_out": getattr(usage, "completion_tokens", 0) or 0,
        "cost_usd": cost,
    }


def request_failure(exc: BaseException, attempts: int, litellm) -> dict:
    """A rejection for a request that never got an answer."""
    if isinstance(exc, litellm.Timeout):
        reason = "llm_timeout"
    elif is_transient(exc):
        reason = "llm_unavailable"
    else:
        reason = "llm_request_failed"
    detail = " ".join(str(exc).split())[:300]
    return {
        "reason": reason,
        "message": f"no reply after {attempts} attempt(s): {type(exc).__name__}: {detail}",
    }
