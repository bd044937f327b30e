"""`algorithm.kl.mode=in_reward` on the built-in grpo and ppo pipelines, 2 Trainer steps each on 2 Ray CPU slots: the
runs take the pipelines' in-reward variants (old and reference log-probs before the advantages), and the logged
penalty and coefficient are the values verl's formulas give.

Every response of the tiny model runs to `rollout.max_new_tokens` = 8 tokens (it has no EOS token), so a sample's
summed penalty is 8 x its token-mean KL, and verl's data metrics tie the logged KL to the rewards exactly:
`critic/rewards/mean = critic/score/mean - coef x 8 x actor/reward_kl_penalty` (both ranks hold 8 samples and step
their controllers together on the whole step's KL, so they log the same KL and coefficient, and the means over the
ranks keep the identity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl_runtime.trainer import Trainer

from ._task import HF_CONFIG, TokenTask, tiny_config

pytestmark = pytest.mark.slow
RESPONSE_TOKENS = 8
STEP_SAMPLES = 16
"""4 prompts x 4 samples: what one controller update counts (verl's `n_steps`, the whole batch), on 2 ranks too."""
CRITIC = {
    "model": {"hf_config": dict(HF_CONFIG), "init_seed": 3},
    "optimizer": {"lr": 1e-3, "weight_decay": 0.0},
    "micro_batch": {"max_tokens_per_micro_batch": 64},
}
SAME_WEIGHTS_KL = 1e-6
"""Step 1's KL: the actor has not been updated, so its old log-probs are the reference's up to rounding."""


def _run(tmp_path: Path, pipeline: str, kl: dict[str, Any]) -> tuple[dict[str, float], ...]:
    ppo = pipeline == "ppo"
    algorithm = {"adv_estimator": "gae" if ppo else "grpo", "kl": {"mode": "in_reward", **kl}}
    config = tiny_config(
        tmp_path,
        pipeline=pipeline,
        algorithm=algorithm,
        critic=CRITIC if ppo else None,
        total_steps=2,
        checkpoint_every=2,
    )
    result = Trainer(config, TokenTask).fit()
    assert result.end_step == 2 and len(result.history) == 2
    for metrics in result.history:
        assert metrics["response_length/min"] == metrics["response_length/max"] == RESPONSE_TOKENS
        assert "actor/kl_loss" not in metrics  # the KL is in the reward, not a loss term
        assert metrics["timing_s/old_log_prob"] > 0 and metrics["timing_s/ref"] > 0
        assert metrics["actor/grad_norm"] > 0
        if ppo:
            assert "critic/vf_loss" in metrics and "critic/values/mean" in metrics
        coef, kl_value = metrics["actor/reward_kl_penalty_coeff"], metrics["actor/reward_kl_penalty"]
        expected_rewards = metrics["critic/score/mean"] - coef * RESPONSE_TOKENS * kl_value
        assert metrics["critic/rewards/mean"] == pytest.approx(expected_rewards, rel=1e-5, abs=1e-6)
    first, second = result.history
    assert abs(first["actor/reward_kl_penalty"]) < SAME_WEIGHTS_KL
    # After step 1's two updates the policy has moved off the reference: the penalty is there, and lowers the rewards.
    assert second["actor/reward_kl_penalty"] > 100 * SAME_WEIGHTS_KL
    assert second["critic/rewards/mean"] < second["critic/score/mean"]
    return result.history


@pytest.mark.parametrize("pipeline", ["grpo", "ppo"])
def test_a_fixed_coefficient_penalises_the_rewards(tmp_path: Path, ray_runtime: None, pipeline: str) -> None:
    history = _run(tmp_path, pipeline, {"coef": 0.5, "estimator": "k1"})
    assert [metrics["actor/reward_kl_penalty_coeff"] for metrics in history] == [0.5, 0.5]


@pytest.mark.parametrize("pipeline", ["grpo", "ppo"])
def test_the_adaptive_controller_moves_the_coefficient_by_its_formula(
    tmp_path: Path, ray_runtime: None, pipeline: str
) -> None:
    coef, target, horizon = 0.5, 0.01, 100
    history = _run(tmp_path, pipeline, {"coef": coef, "target": target, "horizon": horizon})
    first, second = history
    assert first["actor/reward_kl_penalty_coeff"] == coef
    # Ziegler et al.'s update after step 1 (verl's AdaptiveKLController) on the step's KL (~0, far below the target:
    # the proportional error clips to -0.2) and its 16 samples.
    error = min(max(first["actor/reward_kl_penalty"] / target - 1, -0.2), 0.2)
    assert error == -0.2
    expected = coef * (1 + error * STEP_SAMPLES / horizon)
    assert second["actor/reward_kl_penalty_coeff"] == pytest.approx(expected, rel=1e-12)
