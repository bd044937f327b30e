"""Algorithm settings that only a whole run exercises, each through 2 Trainer steps on 2 Ray CPU slots: the rollout
importance-sampling correction (`algorithm.rollout_correction`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_runtime.trainer import Trainer

from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow
VERL_IS_METRICS = (
    "rollout_corr/rollout_is_mean",
    "rollout_corr/rollout_is_std",
    "rollout_corr/rollout_is_min",
    "rollout_corr/rollout_is_max",
    "rollout_corr/rollout_is_eff_sample_size",
    "rollout_corr/rollout_is_ratio_fraction_high",
    "rollout_corr/rollout_is_ratio_fraction_low",
)


@pytest.mark.parametrize(
    ("correction", "fraction"),
    [
        ({"mode": "tis"}, "rollout_corr/rollout_is_truncated_fraction"),
        ({"mode": "mis", "level": "sequence", "upper": 4.0}, "rollout_corr/rollout_is_masked_fraction"),
    ],
)
def test_rollout_correction_trains_and_reports_verl_metrics(
    tmp_path: Path, ray_runtime: None, correction: dict[str, object], fraction: str
) -> None:
    config = tiny_config(tmp_path, algorithm={"rollout_correction": correction}, total_steps=2, checkpoint_every=2)
    result = Trainer(config, TokenTask).fit()

    assert result.end_step == 2 and len(result.history) == 2
    for metrics in result.history:
        assert metrics["actor/grad_norm"] > 0
        for name in (*VERL_IS_METRICS, fraction):
            assert name in metrics, name
        # The HF rollout engine and the trainer compute in float32 from the same weights: the ratios are ~1.
        assert metrics["rollout_corr/rollout_is_mean"] == pytest.approx(1.0, abs=0.05)
        assert 0 < metrics["rollout_corr/rollout_is_eff_sample_size"] <= 1.0 + 1e-6
        assert metrics["rollout_corr/rollout_is_min"] <= metrics["rollout_corr/rollout_is_max"]
        assert 0 <= metrics[fraction] <= 1
