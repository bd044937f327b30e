"""The driver side of steps: call `run_steps` on every worker, wait with a timeout, merge the metrics.

The driver only ever receives metric dicts; `StepResult.received_bytes` counts what it received (the pickled
size of the metric dicts `ray.get` returned) so a test can check that no sample tensor reached it.

Per call the driver submits one call per worker for one or more consecutive steps (the workers run them without
coming back in between), then blocks in `ray.wait` on every pending call at once, waking every FAULT_POLL_S to
fetch (one `ray.get` for all that finished) and check what has finished, so a failed or dead rank stops the run
early. Its own work is O(workers) calls into Ray per call, not per step: running k steps per call divides it by k.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from rl_runtime.workers._errors import NodeExecutionError, StepTimeoutError, WorkerLostError

# Re-exported: the pipelined driver (`_driver_async`) imports them from here.
from rl_runtime.workers._step_result import StepResult as StepResult
from rl_runtime.workers._step_result import step_result as step_result

logger = logging.getLogger(__name__)

PING_TIMEOUT_S = 10.0
"""A live worker answers `ping` (its own concurrency group) in milliseconds; ten seconds rules out a busy node."""

FAULT_POLL_S = 0.5
"""While ranks still run, the driver looks at the finished ones this often: a failed or dead rank is reported at most
half a second late, and a step of minutes costs a few hundred cheap wake-ups."""


class Driver:
    """Runs steps on a list of DAG workers (index = rank) and raises the first fault it sees.

    A node that raised comes back as its NodeExecutionError; a worker whose process died, or that does not answer
    a liveness check once `timeout_s` has passed, raises WorkerLostError naming its rank; live workers that are
    still busy after `timeout_s` raise StepTimeoutError.
    """

    def __init__(self, workers: Sequence[Any], timeout_s: float) -> None:
        if not workers:
            raise ValueError("Driver needs at least one worker")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"timeout_s must be a number of seconds > 0, got {timeout_s!r}")
        self.workers = list(workers)
        self.timeout_s = float(timeout_s)

    def run_step(self, step: int) -> StepResult:
        """Run `step` on every worker and merge their metrics."""
        return self.run_steps([step])[0]

    def run_steps(self, steps: Sequence[int]) -> list[StepResult]:
        """Run `steps` in order on every worker, one call each; each step's merged metrics.

        The timeout is `timeout_s` per step."""
        steps = list(steps)
        if not steps:
            raise ValueError("run_steps needs at least one step")
        refs = [worker.run_steps.remote(steps) for worker in self.workers]
        rank_of = {ref: rank for rank, ref in enumerate(refs)}
        values: list[list[dict[str, float]]] = [[] for _ in refs]
        pending = refs
        timeout_s = self.timeout_s * len(steps)
        deadline = time.monotonic() + timeout_s
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._raise_for_stragglers(sorted(rank_of[ref] for ref in pending), steps, timeout_s)
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=min(remaining, FAULT_POLL_S))
            for ref, value in zip(ready, self._get_all(ready, rank_of, steps[0]), strict=True):
                values[rank_of[ref]] = value
        return [step_result(step, [rank_values[index] for rank_values in values]) for index, step in enumerate(steps)]

    def _get_all(self, refs: list[Any], rank_of: dict[Any, int], step: int) -> list[list[dict[str, float]]]:
        """The values of finished calls in one `ray.get`; on a failure, the lowest failing rank's error."""
        if not refs:
            return []
        try:
            return ray.get(refs)
        except (RayActorError, RayTaskError):
            # One get for all does not say whose call failed; fetch them one by one, in rank order, to name it.
            for ref in sorted(refs, key=rank_of.__getitem__):
                self._get(ref, rank_of[ref], step)
            raise

    def _get(self, ref: Any, rank: int, step: int) -> list[dict[str, float]]:
        try:
            return ray.get(ref)
        except RayActorError as error:
            raise WorkerLostError(rank, step, f"its actor died ({type(error).__name__})") from error
        except RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, NodeExecutionError):
                raise cause from None
            raise

    def _raise_for_stragglers(self, ranks: list[int], steps: list[int], timeout_s: float) -> None:
        for rank in ranks:
            try:
                ray.get(self.workers[rank].ping.remote(), timeout=PING_TIMEOUT_S)
            except (RayActorError, GetTimeoutError) as error:
                raise WorkerLostError(
                    rank, steps[0], f"no result within {timeout_s:g} s and no answer to a liveness check"
                ) from error
        what = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        raise StepTimeoutError(
            f"{what}: worker rank(s) {', '.join(map(str, ranks))} are alive but did not finish within "
            f"{timeout_s:g} s; raise the driver's timeout_s or look for a node that waits forever"
        )


def run_steps(workers: Sequence[Any], steps: int | Sequence[int], timeout_s: float) -> list[StepResult]:
    """Run steps `0..steps-1` (or the given step numbers) on `workers`, one after another."""
    numbers = range(steps) if isinstance(steps, int) else steps
    driver = Driver(workers, timeout_s)
    return [driver.run_step(step) for step in numbers]
