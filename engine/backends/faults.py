"""Faults have an owner: a fault of the machine is asked again and then reported, never recorded
against a candidate; a candidate is a crash only when its own code crashes again.

The rule, for one evaluation:
- MACHINE_FAULT (the judge or a runner could not start before the candidate's code was loaded,
  the judge's own memory ran out, the GPU was lost) is asked again with exponential backoff
  (`Backoff`); still failing, it stays a machine fault, which the search charges to no one.
- `crash` (the candidate's runner, or the judge, died with the candidate's code loaded) may be
  either's: the candidate is run once more, in a fresh runner. Crashing again, it is the
  candidate's crash only if a known-good request (a fresh runner that loads an empty module)
  then passes; where that fails too, the machine is at fault.
- `timing_tampered` may be either's too: a host loaded by other work delays a fetch or a call as
  work moved out of the timed call would (the H200's README search lost its only seed candidate
  so). The candidate is timed once more, in a fresh runner; the second verdict stands, and a
  candidate that moves its work moves it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tenacity

from engine import settings
from engine.jobs import MACHINE_FAULT, EvalResult

# `KERNELBRAIN_FAULT_BACKOFF_S=S`: the first wait before a machine fault is asked again, in
# seconds (0 asks again at once: tests).
BACKOFF_SWITCH = settings.FAULT_BACKOFF_S
# The known-good request's candidate: a module that does nothing, so nothing of it can crash.
KNOWN_GOOD_SOURCE = "# kernelbrain's known-good request: a fresh runner loads this and ends\n"


@dataclass(frozen=True)
class Backoff:
    """How a machine fault is asked again: `tries` in all, the first wait `first_s`, doubling
    up to `cap_s`. Three tries 2 s and 4 s apart: a judge starting while others hold the host's
    memory often starts seconds later; a longer outage is the search's to pause for."""

    tries: int = 3
    first_s: float = 2.0
    cap_s: float = 30.0

    @classmethod
    def from_environment(cls) -> Backoff:
        """The default backoff, its first wait from KERNELBRAIN_FAULT_BACKOFF_S when set."""
        return cls(first_s=settings.value(BACKOFF_SWITCH))

    def retried(self, ask: Callable[[], EvalResult]) -> EvalResult:
        """`ask()`, asked again while it answers a machine fault; the last answer (which says
        how many tries it took when all were faults)."""

        def gave_up(state: tenacity.RetryCallState) -> EvalResult:
            result = state.outcome.result()
            result.message += f" ({state.attempt_number} tries)"
            return result

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda result: result.machine_fault),
            wait=tenacity.wait_exponential(multiplier=self.first_s, max=self.cap_s),
            stop=tenacity.stop_after_attempt(self.tries),
            retry_error_callback=gave_up,
        )
        return retrying(ask)


def timed_again(first: EvalResult, again: EvalResult) -> EvalResult:
    """The second verdict, charged the GPU time of both and, where it passed, saying why it was
    taken."""
    for activity, seconds in first.gpu_seconds.items():
        again.gpu_seconds[activity] = again.gpu_seconds.get(activity, 0.0) + seconds
    if again.passed:
        again.message = f"timed again in a fresh runner after: {first.message}"
    return again


def judged(ask: Callable[[], EvalResult], known_good: Callable[[], EvalResult],
           backoff: Backoff) -> EvalResult:  # fmt: skip
    """The verdict of `ask` (one evaluation in a fresh runner) under the rule above;
    `known_good` asks the known-good request of the same judge."""
    result = backoff.retried(ask)
    if result.reason == "timing_tampered":
        return timed_again(result, backoff.retried(ask))
    if result.reason != "crash":
        return result
    again = backoff.retried(ask)
    if again.reason != "crash":
        return again  # the first crash was the machine's
    control = backoff.retried(known_good)
    if control.passed:
        again.message += "\n(it crashed again in a fresh runner, while a known-good request passed)"
        return again
    why = control.message or control.reason
    return EvalResult(
        False, MACHINE_FAULT,
        f"the candidate's runner died twice and a known-good request failed too: {why}",
        meaningful=again.meaningful,
    )  # fmt: skip
