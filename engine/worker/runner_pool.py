"""The judge's runners across requests: a runner that ended its evaluation cleanly is lent again
to the next request of the same owner, keeping its process, its CUDA context, Triton's runtime
and its calibration; any other request gets a fresh one.

Who owns a runner is the request's `runner`:
- SHARED: every candidate is the project's own code (the hint library's), so one runner serves
  them all, one after another;
- any other text (the engine gives the candidate's hash): only that candidate's later
  evaluations reuse it, so code an LLM wrote never shares an interpreter with other code;
- FRESH: a runner of its own, closed after it.

A runner is lent again only after an evaluation that ended without a fault of the runner's
(engine.worker.judge.LENT_AGAIN_AFTER) and whose reset found the process-wide state as it was
before the first candidate (engine.runner.state_audit) and the GPU working.
"""

from __future__ import annotations

from engine.worker.protocol import FRESH, SHARED
from engine.worker.runner_process import RunnerProcess
from engine.worker.template import RunnerTemplate, seed_cache


class RunnerPool:
    """One device's idle runner, if any, and the template that forks fresh ones."""

    def __init__(self, template: RunnerTemplate):
        self.template = template
        self.idle: RunnerProcess | None = None

    def take(self, owner: str, triton_cache: str | None, calibrated: bool) -> RunnerProcess:
        """A runner for `owner`, its Triton cache holding `triton_cache`'s kernels; the idle
        one where it is `owner`'s (and calibrated, when `calibrated` is asked for)."""
        runner, self.idle = self.idle, None
        reusable = runner is not None and runner.owner == owner and owner != FRESH
        if reusable and runner.exit_code is None and (runner.calibration or not calibrated):
            # The judge reads or changes the box of a live runner only where it runs the
            # project's code: any other could swap a folder there for a link as it is walked.
            if owner == SHARED:
                self.template.empty_box(keep_kernels=True)  # what the last candidate left
                seed_cache(runner.triton_cache, triton_cache)
            runner.evaluations += 1
            return runner
        if runner is not None:
            runner.close()
        runner = self.template.fork(triton_cache)
        runner.owner = owner
        return runner

    def give_back(self, runner: RunnerProcess, lend_again: bool) -> None:
        """Keep `runner` for its owner's next request, or close it."""
        if lend_again and runner.owner != FRESH and runner.exit_code is None:
            self.idle = runner
        else:
            runner.close()

    def close(self) -> None:
        if self.idle is not None:
            self.idle.close()
            self.idle = None
        self.template.close()
