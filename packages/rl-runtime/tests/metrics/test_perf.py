"""verl's timing, throughput and global_seqlen metrics, worked out by hand."""

from __future__ import annotations

import pytest

from rl_runtime.metrics import MetricsError
from rl_runtime.metrics._perf import (
    compute_throughput_metrics,
    compute_timing_metrics,
    contiguous_rank_tokens,
    global_seqlen_metrics,
)

TIMINGS = {"timing_s/step": 2.0, "timing_s/gen": 0.5, "timing_s/update_actor": 1.3, "timing_s/reward": 0.1}


def test_timing_per_token_uses_response_tokens_for_gen_and_all_tokens_otherwise() -> None:
    metrics = compute_timing_metrics({**TIMINGS, "actor/pg_loss": 0.3}, num_prompt_tokens=8, num_response_tokens=5)
    assert metrics == pytest.approx(
        {
            **TIMINGS,
            "timing_per_token_ms/gen": 0.5 * 1000 / 5,
            "timing_per_token_ms/update_actor": 1.3 * 1000 / 13,
        }
    )


def test_timing_over_zero_tokens_is_zero() -> None:
    metrics = compute_timing_metrics({"timing_s/gen": 0.5}, num_prompt_tokens=4, num_response_tokens=0)
    assert metrics["timing_per_token_ms/gen"] == 0.0


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_timing_token_counts_must_be_counts(bad: object) -> None:
    with pytest.raises(MetricsError, match="num_response_tokens must be an int >= 0"):
        compute_timing_metrics(TIMINGS, num_prompt_tokens=1, num_response_tokens=bad)  # type: ignore[arg-type]


def test_throughput_is_tokens_per_second_per_gpu() -> None:
    metrics = compute_throughput_metrics(total_num_tokens=13, step_seconds=2.0, n_gpus=4)
    assert metrics == {"perf/total_num_tokens": 13.0, "perf/time_per_step": 2.0, "perf/throughput": 13 / 8}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"total_num_tokens": -1}, "total_num_tokens must be an int >= 0"),
        ({"step_seconds": 0.0}, r"step_seconds must be a finite number > 0 \(timing_s/step\)"),
        ({"step_seconds": float("nan")}, "step_seconds must be a finite number > 0"),
        ({"step_seconds": float("inf")}, "step_seconds must be a finite number > 0"),
        ({"n_gpus": 0}, "n_gpus must be an int >= 1"),
    ],
)
def test_throughput_rejections(kwargs: dict[str, float], message: str) -> None:
    arguments = {"total_num_tokens": 13, "step_seconds": 2.0, "n_gpus": 4, **kwargs}
    with pytest.raises(MetricsError, match=message):
        compute_throughput_metrics(**arguments)  # type: ignore[arg-type]


def test_contiguous_split_sums_blocks() -> None:
    assert contiguous_rank_tokens([5, 4, 1, 2], 2) == [9, 3]
    assert contiguous_rank_tokens([5, 4, 1, 2], 4) == [5, 4, 1, 2]
    assert contiguous_rank_tokens([5, 4, 1, 2], 1) == [12]


def test_contiguous_split_needs_an_even_split() -> None:
    with pytest.raises(MetricsError, match="batch of 3 sequences must split evenly over 2 ranks"):
        contiguous_rank_tokens([1, 2, 3], 2)
    with pytest.raises(MetricsError, match="num_ranks must be an int >= 1"):
        contiguous_rank_tokens([1, 2], 0)


def test_global_seqlen_before_and_after_balancing() -> None:
    # Sequences [5, 4, 1, 2] on two ranks: naive blocks [9, 3], balanced {5, 1} and {4, 2}: [6, 6].
    assert global_seqlen_metrics([9, 3], [6, 6]) == {
        "global_seqlen/min": 3.0,
        "global_seqlen/max": 9.0,
        "global_seqlen/minmax_diff": 6.0,
        "global_seqlen/balanced_min": 6.0,
        "global_seqlen/balanced_max": 6.0,
        "global_seqlen/mean": 6.0,
    }
    assert set(global_seqlen_metrics([1], [1], prefix="val_seqlen")) >= {"val_seqlen/min", "val_seqlen/mean"}


def test_global_seqlen_rejections() -> None:
    with pytest.raises(MetricsError, match=r"must list the same ranks .* got 2 and 3 sums"):
        global_seqlen_metrics([1, 2], [1, 1, 1])
    with pytest.raises(MetricsError, match="got 0 and 0 sums"):
        global_seqlen_metrics([], [])
    with pytest.raises(MetricsError, match="balancing must keep the token total: rank_tokens sum to 3"):
        global_seqlen_metrics([1, 2], [1, 1])
