"""Merging per-rank metric dicts: the reduction each name gets, and the merged values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_runtime.metrics import MetricsError, reduce_rank_metrics
from rl_runtime.metrics._reduce import Reduction, reduction_for


@pytest.mark.parametrize(
    ("name", "reduction"),
    [
        ("critic/score/mean", Reduction.MEAN),
        ("actor/pg_loss", Reduction.MEAN),
        ("response_length/clip_ratio", Reduction.MEAN),
        ("critic/score/max", Reduction.MAX),
        ("global_seqlen/balanced_max", Reduction.MAX),
        ("perf/max_memory_allocated_gb", Reduction.MAX),
        ("critic/values/min", Reduction.MIN),
        ("global_seqlen/balanced_min", Reduction.MIN),
        ("timing_s/gen", Reduction.MAX),
        ("timing_s/gen_min", Reduction.MAX),
        ("perf/time_per_step", Reduction.MAX),
        ("perf/total_num_tokens", Reduction.SUM),
        ("perf/throughput", Reduction.SUM),
        ("fully_async/count/stale_samples_processed", Reduction.SUM),
        ("coordinator/bytes_through_controller", Reduction.SUM),
        ("data/num_samples", Reduction.SUM),
        ("rollout/generated_tokens", Reduction.SUM),
        ("global_seqlen/minmax_diff", Reduction.MEAN),  # recomputed after merging
        ("maximum/thing", Reduction.MEAN),  # "max" must be a whole word of the last segment
    ],
)
def test_reduction_by_name(name: str, reduction: Reduction) -> None:
    assert reduction_for(name) is reduction


def test_overrides_win() -> None:
    assert reduction_for("actor/pg_loss", {"actor/pg_loss": Reduction.SUM}) is Reduction.SUM
    assert reduction_for("timing_s/gen", {"timing_s/gen": "mean"}) is Reduction.MEAN  # type: ignore[dict-item]


def test_two_ranks_merge_by_rule() -> None:
    rank0 = {
        "critic/score/mean": 1.0,
        "critic/score/max": 2.0,
        "critic/score/min": 0.0,
        "timing_s/update_actor": 3.0,
        "perf/total_num_tokens": 100.0,
        "perf/throughput": 10.0,
        "global_seqlen/max": 60.0,
        "global_seqlen/min": 40.0,
        "global_seqlen/minmax_diff": 20.0,
        "critic/vf_loss": 0.5,
    }
    rank1 = {
        "critic/score/mean": 2.0,
        "critic/score/max": 5.0,
        "critic/score/min": -1.0,
        "timing_s/update_actor": 4.0,
        "perf/total_num_tokens": 50,
        "perf/throughput": 5.0,
        "global_seqlen/max": 70.0,
        "global_seqlen/min": 45.0,
        "global_seqlen/minmax_diff": 25.0,
    }
    assert reduce_rank_metrics([rank0, rank1]) == {
        "critic/score/mean": 1.5,
        "critic/score/max": 5.0,
        "critic/score/min": -1.0,
        "timing_s/update_actor": 4.0,
        "perf/total_num_tokens": 150.0,
        "perf/throughput": 15.0,
        "global_seqlen/max": 70.0,
        "global_seqlen/min": 40.0,
        "global_seqlen/minmax_diff": 30.0,  # max - min of the merged values, not a mean of differences
        "critic/vf_loss": 0.5,  # only rank 0 reports it
    }


def test_nan_ranks_are_skipped_and_all_nan_stays_nan() -> None:
    merged = reduce_rank_metrics([{"a/mean": math.nan, "b": math.nan}, {"a/mean": 3.0, "b": math.nan}])
    assert merged["a/mean"] == 3.0
    assert math.isnan(merged["b"])


def test_no_ranks_merge_to_nothing() -> None:
    assert reduce_rank_metrics([]) == {}


@pytest.mark.parametrize("bad", ["1.0", None, True])
def test_non_numbers_are_rejected(bad: object) -> None:
    with pytest.raises(MetricsError, match="metric 'x' of rank 1 must be a number"):
        reduce_rank_metrics([{"x": 1.0}, {"x": bad}])  # type: ignore[dict-item]


values = st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=8)


@given(values)
def test_reductions_match_brute_force(ranks: list[float]) -> None:
    per_rank = [{"x/max": v, "x/min": v, "x/mean": v, "x/num_tokens": v} for v in ranks]
    merged = reduce_rank_metrics(per_rank)
    assert merged["x/max"] == max(ranks)
    assert merged["x/min"] == min(ranks)
    assert merged["x/mean"] == pytest.approx(sum(ranks) / len(ranks), abs=1e-6)
    assert merged["x/num_tokens"] == pytest.approx(sum(ranks), abs=1e-6)
