"""The actor's objective: the composition of policy loss, KL loss and entropy bonus, its checks and its flags."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch

from rl_core import UnknownNameError
from rl_core.kl import kl_loss
from rl_core.losses import (
    LossNormalizer,
    PolicyLossInputs,
    aggregate_loss,
    get_policy_loss,
    ppo,
    with_rollout_correction,
)
from rl_core.objectives import PolicyObjective
from rl_core.schema import ADVANTAGES, OLD_LOG_PROBS, REF_LOG_PROBS, RESPONSE_MASK, ROLLOUT_LOG_PROBS


class _Outputs(NamedTuple):
    log_probs: torch.Tensor | None
    entropy: torch.Tensor | None


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    mask = (torch.rand(3, 6, generator=gen) > 0.3).long()
    old = -torch.rand(3, 6, generator=gen)
    return {
        RESPONSE_MASK: mask,
        OLD_LOG_PROBS: old,
        ROLLOUT_LOG_PROBS: old - 0.05,
        REF_LOG_PROBS: old - 0.1,
        ADVANTAGES: torch.randn(3, 6, generator=gen),
    }


def _outputs(batch: dict[str, torch.Tensor]) -> _Outputs:
    log_probs = (batch[OLD_LOG_PROBS] + 0.05).requires_grad_()
    return _Outputs(log_probs, torch.rand(log_probs.shape, generator=torch.Generator().manual_seed(1)))


def test_the_objective_is_policy_loss_plus_kl_minus_entropy_over_the_normaliser() -> None:
    batch = _batch()
    outputs = _outputs(batch)
    assert outputs.log_probs is not None and outputs.entropy is not None
    mask = batch[RESPONSE_MASK]
    normalizer = LossNormalizer(float(mask.sum()) * 2, 6.0, 6.0)  # as if another rank held as many tokens
    objective = PolicyObjective(params={"clip_ratio_high": 0.28}, kl_coef=0.1, kl_estimator="k3", entropy_coef=0.01)
    loss, metrics = objective(outputs, batch, normalizer)
    inputs = PolicyLossInputs(outputs.log_probs, batch[OLD_LOG_PROBS], batch[ADVANTAGES], mask)
    expected = (
        ppo(inputs, normalizer=normalizer, clip_ratio_high=0.28).loss
        + 0.1 * kl_loss(outputs.log_probs, batch[REF_LOG_PROBS], mask, estimator="k3", normalizer=normalizer)
        - 0.01 * aggregate_loss(outputs.entropy, mask, "token-mean", normalizer)
    )
    torch.testing.assert_close(loss, expected)
    assert loss.requires_grad
    assert {"actor/pg_clipfrac", "actor/ppo_kl", "actor/kl_loss", "actor/entropy"} <= set(metrics)
    assert objective.required_fields == (ADVANTAGES, RESPONSE_MASK, REF_LOG_PROBS)


def test_without_old_log_probs_the_update_is_on_policy_and_correction_metrics_go_to_rollout_corr() -> None:
    batch = _batch()
    outputs = _outputs(batch)
    del batch[OLD_LOG_PROBS]
    assert outputs.log_probs is not None
    objective = PolicyObjective(rollout_correction={"mode": "tis"})
    loss, metrics = objective(outputs, batch, LossNormalizer.from_mask(batch[RESPONSE_MASK]))
    inputs = PolicyLossInputs(
        outputs.log_probs,
        outputs.log_probs.detach(),
        batch[ADVANTAGES],
        batch[RESPONSE_MASK],
        rollout_log_probs=batch[ROLLOUT_LOG_PROBS],
    )
    torch.testing.assert_close(loss, with_rollout_correction("ppo", mode="tis")(inputs).loss)
    assert metrics["actor/ppo_kl"] == 0 and "rollout_corr/rollout_is_mean" in metrics


@pytest.mark.parametrize(
    ("kwargs", "inert"),
    [
        ({}, True),
        ({"policy_loss": "decoupled_ppo"}, True),
        ({"kl_coef": 0.1}, False),
        ({"entropy_coef": 0.01}, False),
        ({"rollout_correction": {"mode": "mis"}}, False),
        ({"policy_loss": "gspo"}, False),
    ],
)
def test_only_a_lone_advantage_multiple_loss_is_inert_on_zero_advantage_rows(kwargs: dict, inert: bool) -> None:
    assert PolicyObjective(**kwargs).inert_on_zero_advantage is inert


def test_names_and_numbers_are_checked_on_construction() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown policy loss 'ppo2'"):
        PolicyObjective(policy_loss="ppo2")
    with pytest.raises(UnknownNameError, match=r"unknown loss aggregation mode 'mean'"):
        PolicyObjective(aggregation="mean")
    with pytest.raises(UnknownNameError, match=r"k4"):
        PolicyObjective(kl_estimator="k4")
    with pytest.raises(ValueError, match=r"PolicyObjective\.kl_coef: expected a finite number >= 0, found -0\.1"):
        PolicyObjective(kl_coef=-0.1)
    with pytest.raises(ValueError, match=r"PolicyObjective\.entropy_coef: expected a finite number >= 0, found nan"):
        PolicyObjective(entropy_coef=float("nan"))


def test_the_objective_keeps_a_read_only_copy_of_its_parameters_and_names_missing_fields() -> None:
    params = {"clip_ratio": 0.3}
    objective = PolicyObjective(params=params)
    params["clip_ratio"] = 0.9
    assert objective.params["clip_ratio"] == 0.3 and objective.loss_fn is get_policy_loss("ppo")
    with pytest.raises(TypeError):
        objective.params["clip_ratio"] = 0.5  # pyright: ignore[reportIndexIssue]
    batch = _batch()
    with pytest.raises(KeyError, match=r"needs batch fields \['ref_log_probs'\]"):
        without_ref = {name: value for name, value in batch.items() if name != REF_LOG_PROBS}
        PolicyObjective(kl_coef=0.1)(_outputs(batch), without_ref, LossNormalizer.from_mask(batch[RESPONSE_MASK]))
    with pytest.raises(ValueError, match=r"entropy bonus \(entropy_coef > 0\) needs the forward's entropy"):
        PolicyObjective(entropy_coef=0.1)(
            _Outputs(_outputs(batch).log_probs, None), batch, LossNormalizer.from_mask(batch[RESPONSE_MASK])
        )
