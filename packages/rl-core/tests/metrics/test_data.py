"""verl's data metrics on the hand-worked batch (conftest), every value worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core import ShapeError
from rl_core.metrics import MetricsError, compute_data_metrics

from .conftest import MAX_PROMPT_LENGTH, MAX_RESPONSE_LENGTH

LIMITS = {"max_prompt_length": MAX_PROMPT_LENGTH, "max_response_length": MAX_RESPONSE_LENGTH}

# returns - values on the mask = [0, 1, 0, 0, 1]: unbiased variance 1.2 / 4; returns [1, 2, 0, 1, 2]: 2.8 / 4.
EXPLAINED_VARIANCE = 1.0 - 0.3 / (0.7 + 1e-5)

EXPECTED = {
    "critic/score/mean": 1.25,
    "critic/score/max": 1.5,
    "critic/score/min": 1.0,
    "critic/rewards/mean": 1.0,
    "critic/rewards/max": 1.2,
    "critic/rewards/min": 0.8,
    "critic/advantages/mean": -0.1,
    "critic/advantages/max": 0.5,
    "critic/advantages/min": -0.5,
    "critic/returns/mean": 1.2,
    "critic/returns/max": 2.0,
    "critic/returns/min": 0.0,
    "critic/values/mean": 0.8,
    "critic/values/max": 1.0,
    "critic/values/min": 0.0,
    "critic/vf_explained_var": EXPLAINED_VARIANCE,
    "response_length/mean": 5 / 3,
    "response_length/max": 3.0,
    "response_length/min": 0.0,
    "response_length/clip_ratio": 1 / 3,
    "response_length_non_aborted/mean": 2.5,
    "response_length_non_aborted/max": 3.0,
    "response_length_non_aborted/min": 2.0,
    "response_length_non_aborted/clip_ratio": 0.5,
    "response/aborted_ratio": 1 / 3,
    "prompt_length/mean": 8 / 3,
    "prompt_length/max": 3.0,
    "prompt_length/min": 2.0,
    "prompt_length/clip_ratio": 2 / 3,
}


def test_every_metric_matches_the_hand_worked_value(batch: dict[str, torch.Tensor]) -> None:
    metrics = compute_data_metrics(batch, **LIMITS)
    assert metrics.keys() == EXPECTED.keys()
    for name, value in EXPECTED.items():
        assert metrics[name] == pytest.approx(value, abs=1e-6), name
        assert type(metrics[name]) is float, name


def test_lengths_from_masks_give_the_same_metrics(batch: dict[str, torch.Tensor]) -> None:
    from_lengths = compute_data_metrics(batch, **LIMITS)
    del batch["prompt_len"], batch["response_len"]
    assert compute_data_metrics(batch, **LIMITS) == pytest.approx(from_lengths, nan_ok=True)


def test_critic_metrics_only_with_values(batch: dict[str, torch.Tensor]) -> None:
    del batch["values"]
    metrics = compute_data_metrics(batch, **LIMITS)
    assert not [name for name in metrics if name.startswith("critic/values") or name == "critic/vf_explained_var"]
    with pytest.raises(MetricsError, match=r"batch has no 'values', which critic/values/\* needs"):
        compute_data_metrics(batch, **LIMITS, use_critic=True)


def test_use_critic_false_skips_values(batch: dict[str, torch.Tensor]) -> None:
    assert "critic/vf_explained_var" not in compute_data_metrics(batch, **LIMITS, use_critic=False)


def test_all_aborted_gives_nan_stats_and_a_warning(
    batch: dict[str, torch.Tensor], caplog: pytest.LogCaptureFixture
) -> None:
    batch["response_mask"] = torch.zeros_like(batch["response_mask"])
    batch["response_len"] = torch.zeros(3, dtype=torch.int64)
    metrics = compute_data_metrics(batch, **LIMITS)
    for name in (
        "critic/score/mean",
        "critic/advantages/max",
        "critic/vf_explained_var",
        "response_length_non_aborted/clip_ratio",
    ):
        assert math.isnan(metrics[name]), name
    assert metrics["response/aborted_ratio"] == 1.0
    assert metrics["response_length/mean"] == 0.0
    assert "no non-aborted samples to summarise" in caplog.text


def test_one_response_token_has_no_explained_variance(batch: dict[str, torch.Tensor]) -> None:
    batch["response_mask"] = torch.zeros_like(batch["response_mask"])
    batch["response_mask"][0, 3] = 1
    assert math.isnan(compute_data_metrics(batch, **LIMITS)["critic/vf_explained_var"])


def test_samples_order_does_not_matter(batch: dict[str, torch.Tensor]) -> None:
    order = torch.tensor([2, 0, 1])
    shuffled = {name: tensor[order] for name, tensor in batch.items()}
    assert compute_data_metrics(shuffled, **LIMITS) == pytest.approx(compute_data_metrics(batch, **LIMITS))


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_length_limits_must_be_positive_ints(batch: dict[str, torch.Tensor], bad: object) -> None:
    with pytest.raises(MetricsError, match=r"max_response_length must be an int >= 1"):
        compute_data_metrics(batch, max_prompt_length=3, max_response_length=bad)  # type: ignore[arg-type]
    with pytest.raises(MetricsError, match=r"max_prompt_length must be an int >= 1"):
        compute_data_metrics(batch, max_prompt_length=bad, max_response_length=3)  # type: ignore[arg-type]


def test_shape_mismatch_names_the_tensor(batch: dict[str, torch.Tensor]) -> None:
    batch["advantages"] = batch["advantages"][:, :5]
    with pytest.raises(ShapeError, match=r"advantages must have shape \(B, T\) with T=6"):
        compute_data_metrics(batch, **LIMITS)


def test_integer_scores_are_rejected(batch: dict[str, torch.Tensor]) -> None:
    batch["token_level_scores"] = batch["token_level_scores"].long()
    with pytest.raises(ShapeError, match="token_level_scores must have a floating dtype"):
        compute_data_metrics(batch, **LIMITS)
