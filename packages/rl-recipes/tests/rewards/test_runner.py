"""The per-sample safe runner: failures of each kind are scored, counted and logged with their uid."""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest

from rl_recipes.rewards import FAILURE_KINDS, RewardRunner, RewardSample, gsm8k_exact_match

_HOLD_S = 60.0  # a stuck sample waits this long for release(), which comes only after the run returned
_TIMEOUT_S = 0.2


def test_failures_are_caught_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    release, slept = threading.Event(), threading.Event()

    def flaky(response_text: str, ground_truth: str, **extra: Any) -> float:
        if extra["uid"] == "raises":
            raise RuntimeError("bad sample")
        if extra["uid"] == "sleeps":
            release.wait(_HOLD_S)
            slept.set()
            return 1.0
        if extra["uid"] == "string":
            return "1.0"  # type: ignore[return-value]
        if extra["uid"] == "nan":
            return math.nan
        if extra["uid"] == "bool":
            return True  # type: ignore[return-value]
        return float(response_text)

    uids = ["ok-1", "raises", "sleeps", "string", "nan", "bool", "ok-2"]
    samples = [RewardSample(uid, "0.5" if uid == "ok-1" else "2", "x", {"uid": uid}) for uid in uids]
    runner = RewardRunner(flaky, timeout_s=_TIMEOUT_S, failure_score=-1.0, max_workers=2)
    with caplog.at_level(logging.WARNING, logger="rl_recipes.rewards._runner"):
        results = runner.run(samples)
    held_up = slept.is_set()
    release.set()

    assert not held_up  # the timed-out sample did not hold the batch up: it was still stuck when the batch returned
    assert results.scores == [0.5, -1.0, -1.0, -1.0, -1.0, 1.0, 2.0]
    assert results.failures == {"exception": 1, "timeout": 1, "non_number": 1, "non_finite": 1}
    assert results.failed_uids == {
        "raises": "exception",
        "sleeps": "timeout",
        "string": "non_number",
        "nan": "non_finite",
    }
    assert results.num_failed == 4
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4  # each failure logged once
    for uid, detail in [("raises", "RuntimeError: bad sample"), ("sleeps", "no result within 0.2 s"),
                        ("string", "returned str '1.0'"), ("nan", "returned nan")]:  # fmt: skip
        assert any(f"uid={uid}" in m and detail in m for m in messages), (uid, messages)


def test_clean_batch_keeps_order_and_zero_counts() -> None:
    samples = [RewardSample(i, f"#### {i}", str(i % 3)) for i in range(20)]
    results = RewardRunner(gsm8k_exact_match, timeout_s=5.0).run(samples)
    assert results.scores == [float(i < 3) for i in range(20)]
    assert results.failures == dict.fromkeys(FAILURE_KINDS, 0)
    assert results.failed_uids == {}


def test_empty_batch() -> None:
    assert RewardRunner(gsm8k_exact_match).run([]).scores == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"timeout_s": 0}, "timeout_s must be > 0"),
        ({"max_workers": 0}, "max_workers must be >= 1"),
        ({"failure_score": math.inf}, "failure_score must be finite"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RewardRunner(gsm8k_exact_match, **kwargs)


def test_not_callable() -> None:
    with pytest.raises(TypeError, match="fn must be a reward function, got int"):
        RewardRunner(3)  # type: ignore[arg-type]


def test_threads_are_reused_across_runs_and_a_stuck_one_is_replaced() -> None:
    release = threading.Event()
    threads: set[int] = set()

    def reward(response_text: str, ground_truth: str, **extra: Any) -> float:
        threads.add(threading.get_ident())
        if response_text == "hang":
            release.wait(_HOLD_S)
        return 1.0

    runner = RewardRunner(reward, timeout_s=_TIMEOUT_S, max_workers=2)
    samples = [RewardSample(i, "ok", "x") for i in range(20)]
    assert runner.run(samples).scores == [1.0] * 20
    assert runner.run(samples).scores == [1.0] * 20
    assert len(threads) <= 2  # the pool's two threads served both runs
    stuck = runner.run([RewardSample("stuck", "hang", "x"), *samples])
    release.set()
    assert stuck.failed_uids == {"stuck": "timeout"}
    assert stuck.scores[1:] == [1.0] * 20  # the other thread and the stuck one's replacement scored the rest
