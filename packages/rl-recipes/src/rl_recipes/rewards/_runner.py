"""Per-sample safe evaluation of a reward function: exceptions, timeouts and bad returns are counted, not raised.

Each sample runs in its own daemon thread, at most `max_workers` at a time, with its own deadline. Threads
rather than processes because reward functions are loaded from arbitrary files and closures (often not
picklable), are usually fast pure-Python rules for which process start-up and pickling cost more than the
call, and can see the caller's already-imported modules. A thread cannot be killed: a sample past its
deadline is scored as a failure and its thread is abandoned (daemon, so it never blocks interpreter exit)
while a fresh thread takes its slot. A function that hangs forever therefore leaks one idle thread per
timed-out sample; use a process-based reward server for untrusted or CPU-heavy code.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
import time
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rl_recipes.rewards._registry import RewardFunction

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_WORKERS = 8
DEFAULT_FAILURE_SCORE = 0.0

FAILURE_EXCEPTION = "exception"
FAILURE_TIMEOUT = "timeout"
FAILURE_NON_NUMBER = "non_number"
FAILURE_NON_FINITE = "non_finite"
FAILURE_KINDS = (FAILURE_EXCEPTION, FAILURE_TIMEOUT, FAILURE_NON_NUMBER, FAILURE_NON_FINITE)
"""Every kind of per-sample failure, the keys of `RewardResults.failures`."""


@dataclass(frozen=True)
class RewardSample:
    """One response to score: its uid (for logs), the response text, the ground truth and extra keywords."""

    uid: Hashable
    response_text: str
    ground_truth: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RewardResults:
    """Scores in sample order, failure counts by kind (every kind present), and the failed uids with kinds."""

    scores: list[float]
    failures: dict[str, int]
    failed_uids: dict[Hashable, str]

    @property
    def num_failed(self) -> int:
        """How many samples failed, of any kind."""
        return sum(self.failures.values())


class _Job:
    __slots__ = ("done", "error", "index", "started", "value")

    def __init__(self, index: int) -> None:
        self.index = index
        self.started = time.monotonic()
        self.done = False
        self.value: object = None
        self.error: BaseException | None = None


class RewardRunner:
    """Call `fn` once per sample with a per-sample timeout; failures score `failure_score` and are counted.

    A return value is accepted when it is a real number (`numbers.Real`: int, float, numpy scalars, and
    bool, read as 0/1 since rule rewards naturally return comparisons) and finite; a non-number (str,
    None, tensor, ...) is a `non_number` failure and NaN/inf a `non_finite` one. Each failure is logged
    once, at WARNING, with the sample uid.
    """

    def __init__(
        self,
        fn: RewardFunction,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        failure_score: float = DEFAULT_FAILURE_SCORE,
        max_workers: int = DEFAULT_MAX_WORKERS,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"fn must be a reward function, got {type(fn).__name__}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        if not math.isfinite(failure_score):
            raise ValueError(f"failure_score must be finite, got {failure_score}")
        self.fn = fn
        self.timeout_s = float(timeout_s)
        self.failure_score = float(failure_score)
        self.max_workers = max_workers
        self._name = getattr(fn, "__qualname__", repr(fn))

    def run(self, samples: Sequence[RewardSample]) -> RewardResults:
        """Score every sample; never raises for a failure inside the reward function."""
        outcomes: list[object] = [None] * len(samples)
        finished = threading.Event()
        next_index = 0
        running: list[_Job] = []
        while next_index < len(samples) or running:
            while next_index < len(samples) and len(running) < self.max_workers:
                running.append(self._start(samples[next_index], _Job(next_index), finished))
                next_index += 1
            next_deadline = min(job.started for job in running) + self.timeout_s
            finished.wait(max(0.0, next_deadline - time.monotonic()))
            finished.clear()
            now = time.monotonic()
            still_running = []
            for job in running:
                if job.done:
                    outcomes[job.index] = job
                elif now - job.started >= self.timeout_s:
                    outcomes[job.index] = FAILURE_TIMEOUT
                else:
                    still_running.append(job)
            running = still_running
        return self._collect(samples, outcomes)

    def _start(self, sample: RewardSample, job: _Job, finished: threading.Event) -> _Job:
        def work() -> None:
            try:
                job.value = self.fn(sample.response_text, sample.ground_truth, **sample.extra)
            except BaseException as exc:  # a reward must never take the step down, whatever it raises
                job.error = exc
            job.done = True
            finished.set()

        job.started = time.monotonic()
        threading.Thread(target=work, name=f"reward-{sample.uid}", daemon=True).start()
        return job

    def _collect(self, samples: Sequence[RewardSample], outcomes: list[object]) -> RewardResults:
        scores: list[float] = []
        failures = Counter({kind: 0 for kind in FAILURE_KINDS})
        failed: dict[Hashable, str] = {}
        for sample, outcome in zip(samples, outcomes, strict=True):
            kind, detail, score = self._judge(outcome)
            if kind is not None:
                failures[kind] += 1
                failed[sample.uid] = kind
                logger.warning("reward %s failed on sample uid=%s (%s): %s", self._name, sample.uid, kind, detail)
                score = self.failure_score
            scores.append(score)
        return RewardResults(scores=scores, failures=dict(failures), failed_uids=failed)

    def _judge(self, outcome: object) -> tuple[str | None, str, float]:
        if outcome == FAILURE_TIMEOUT:
            return FAILURE_TIMEOUT, f"no result within {self.timeout_s:g} s", 0.0
        assert isinstance(outcome, _Job)
        if outcome.error is not None:
            return FAILURE_EXCEPTION, f"{type(outcome.error).__name__}: {outcome.error}", 0.0
        value = outcome.value
        if not isinstance(value, numbers.Real):
            return FAILURE_NON_NUMBER, f"returned {type(value).__name__} {value!r:.80}, expected a float", 0.0
        score = float(value)
        if not math.isfinite(score):
            return FAILURE_NON_FINITE, f"returned {score}", 0.0
        return None, "", score
