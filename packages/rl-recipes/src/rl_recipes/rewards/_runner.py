"""Per-sample safe evaluation of a reward function: exceptions, timeouts and bad returns are counted, not raised.

Samples run on `max_workers` long-lived daemon threads that take them from a queue, each sample with its own
deadline from the moment a thread takes it. Threads rather than processes because reward functions are loaded
from arbitrary files and closures (often not picklable), are usually fast pure-Python rules for which process
start-up and pickling cost more than the call, and can see the caller's already-imported modules. Long-lived
because starting a thread per sample cost many times a rule reward's own call (figures: bench/README.md). A
thread cannot be killed: a sample past its deadline is scored as a failure and its thread is retired (it exits
once the call returns; daemon, so it never blocks interpreter exit) while a fresh thread takes its place. A
function that hangs forever therefore leaks one idle thread per timed-out sample; use a process-based reward
server for untrusted or CPU-heavy code.
"""

from __future__ import annotations

import logging
import math
import numbers
import queue
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
IDLE_EXIT_S = 60.0
"""A thread with no sample for this long exits (the next run starts fresh ones), so idle runners hold no threads."""
DEADLINE_CHECKS_PER_TIMEOUT = 10
"""While samples run, deadlines are checked at least this often per timeout, so a sample taken by a thread after the
runner last looked is reported late by at most a tenth of the timeout."""

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
        self.started: float | None = None
        """When a thread took the job (None while it waits in the queue)."""
        self.done = False
        self.value: object = None
        self.error: BaseException | None = None


class _Worker:
    """One long-lived thread running queued jobs until it is retired (its job timed out) or stopped."""

    def __init__(self, jobs: queue.SimpleQueue, fn: RewardFunction, name: str) -> None:
        self.retired = False
        self._jobs, self._fn = jobs, fn
        self.current: _Job | None = None
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        while not self.retired:
            try:
                job, sample, finished = self._jobs.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                self.retired = True
                return
            self.current = job
            job.started = time.monotonic()
            try:
                job.value = self._fn(sample.response_text, sample.ground_truth, **sample.extra)
            except BaseException as exc:  # a reward must never take the step down, whatever it raises
                job.error = exc
            job.done = True
            finished.set()


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
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[_Worker] = []
        self._started_workers = 0
        self._lock = threading.Lock()

    def run(self, samples: Sequence[RewardSample]) -> RewardResults:
        """Score every sample; never raises for a failure inside the reward function."""
        with self._lock:
            self._fill_pool()
            finished = threading.Event()
            jobs = [_Job(index) for index in range(len(samples))]
            for job, sample in zip(jobs, samples, strict=True):
                self._jobs.put((job, sample, finished))
            outcomes: list[object] = [None] * len(samples)
            pending = set(range(len(samples)))
            while pending:
                self._fill_pool()  # a thread that idled out just before the jobs were queued is replaced
                finished.wait(self._wait_s(jobs, pending))
                finished.clear()
                now = time.monotonic()
                for index in list(pending):
                    job = jobs[index]
                    if job.done:
                        outcomes[index] = job
                        pending.discard(index)
                    elif job.started is not None and now - job.started >= self.timeout_s:
                        outcomes[index] = FAILURE_TIMEOUT
                        pending.discard(index)
                        self._retire(job)
            return self._collect(samples, outcomes)

    def _wait_s(self, jobs: list[_Job], pending: set[int]) -> float:
        """How long to wait for a job to finish: until the earliest running deadline, checked at a tenth of it."""
        wait = self.timeout_s / DEADLINE_CHECKS_PER_TIMEOUT
        now = time.monotonic()
        for index in pending:
            started = jobs[index].started
            if started is not None:
                wait = min(wait, started + self.timeout_s - now)
        return max(0.0, wait)

    def _fill_pool(self) -> None:
        self._workers = [worker for worker in self._workers if not worker.retired]
        while len(self._workers) < self.max_workers:
            self._started_workers += 1
            self._workers.append(_Worker(self._jobs, self.fn, f"reward-{self._started_workers}"))

    def _retire(self, job: _Job) -> None:
        """The thread stuck in `job` exits when its call returns; a fresh thread takes its place now."""
        for worker in self._workers:
            if worker.current is job:
                worker.retired = True
        self._fill_pool()

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
