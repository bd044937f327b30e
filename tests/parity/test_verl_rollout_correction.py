"""rl-core's rollout correction (truncated and masked importance sampling) against verl 0.9.1's
`rollout_corr_helper`, and the corrected PPO loss against verl's, on random ragged batches.

- Masked IS: verl has two pieces, IcePop weights (zero outside `[lower, upper]`, mask unchanged, so
  rejected tokens still count in the normaliser) and the `token_k1`/`seq_sum_k1` rejection mask, whose
  bounds apply to `pi_rollout / pi_train` (the k1 statistic), the reciprocal of the IS ratio. Our "mis"
  gives IcePop's weights and verl's rejection mask with reciprocal thresholds, and the wrapped loss treats
  rejected tokens as padding (verl's rejection-sampling semantics). At sequence level verl's
  out-of-bounds fraction counts empty rows in its denominator; ours counts non-empty sequences.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
import torch

from rl_core.losses import PolicyLossInputs, rollout_correction, with_rollout_correction
from tests.parity._policy_inputs import (
    BATCH_SIZES,
    DTYPE,
    LENGTH,
    SEEDS,
    actor_config,
    assert_close,
    clip_config,
    policy_inputs,
)
from tests.parity.conftest import PARITY_TOLERANCE


@pytest.fixture(scope="module")
def rollout_corr(core_algos: ModuleType) -> ModuleType:
    """verl's `rollout_corr_helper` (importable wherever `core_algos` is)."""
    return importlib.import_module("verl.trainer.ppo.rollout_corr_helper")


def _rollout_batch(seed: int, size: int, *, empty_rows: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(old_log_probs, rollout_log_probs, mask): an engine whose log-probs differ by N(0, 0.4^2) noise."""
    inputs = policy_inputs(seed, size, empty_rows=empty_rows, spikes=False)
    gen = torch.Generator().manual_seed(seed + 7)
    noise = 0.4 * torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    # Row 0 agrees exactly, so masked IS always keeps something (verl crashes otherwise, see the last test).
    noise[0] = 0.0
    return inputs.old_log_probs, inputs.old_log_probs + noise, inputs.response_mask


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_tis_matches_verl(rollout_corr: ModuleType, level: str, seed: int, size: int) -> None:
    old, rollout, mask = _rollout_batch(seed, size, empty_rows=False)
    ours = rollout_correction(old, rollout, mask, mode="tis", level=level, upper=1.5)
    weights, metrics = rollout_corr.compute_rollout_correction_weights(
        old - rollout, mask, rollout_is=level, rollout_is_threshold=1.5
    )
    assert_close(ours.weights, weights)
    assert torch.equal(ours.response_mask, mask)
    assert ours.metrics["rollout_is_mean"].item() == pytest.approx(metrics["rollout_is_mean"], abs=PARITY_TOLERANCE)
    fraction = ours.metrics["rollout_is_truncated_fraction"].item()
    assert fraction == pytest.approx(metrics["rollout_is_ratio_fraction_high"], abs=PARITY_TOLERANCE)


@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_mis_weights_are_icepops_and_mask_is_verls_k1_rejection(
    rollout_corr: ModuleType, level: str, seed: int, size: int
) -> None:
    old, rollout, mask = _rollout_batch(seed, size)
    # Sequence ratios multiply 9 token ratios: wider bounds keep some sequences (see the all-rejected test).
    lower, upper = (0.7, 1.6) if level == "token" else (0.3, 3.0)
    ours = rollout_correction(old, rollout, mask, mode="mis", level=level, upper=upper, lower=lower)
    weights, metrics = rollout_corr.compute_rollout_correction_weights(
        old - rollout, mask, rollout_is=level, rollout_is_threshold=f"{lower}_{upper}"
    )
    assert_close(ours.weights, weights)
    assert ours.metrics["rollout_is_mean"].item() == pytest.approx(metrics["rollout_is_mean"], abs=PARITY_TOLERANCE)
    # verl's k1 statistic is log(pi_rollout / pi_train): its bounds are the reciprocals of ours.
    option = "token_k1" if level == "token" else "seq_sum_k1"
    kept, _ = rollout_corr.compute_rollout_rejection_mask(
        old - rollout, mask, rollout_rs=option, rollout_rs_threshold=f"{1 / upper}_{1 / lower}"
    )
    assert torch.equal(ours.response_mask, kept)
    if level == "token":
        assert ours.metrics["rollout_is_masked_fraction"].item() == pytest.approx(
            metrics["rollout_is_oob_ratio"], abs=PARITY_TOLERANCE
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_wrapped_mis_loss_is_verls_loss_with_icepop_weights_on_the_rejection_mask(
    core_algos: ModuleType, rollout_corr: ModuleType, seed: int
) -> None:
    old, rollout, mask = _rollout_batch(seed, 8)
    base = policy_inputs(seed, 8)
    inputs = PolicyLossInputs(base.log_probs, old, base.advantages, mask, rollout_log_probs=rollout)
    ours = with_rollout_correction("ppo", mode="mis", upper=1.6, lower=0.7)(inputs, clip_ratio=0.2)
    weights, _ = rollout_corr.compute_rollout_correction_weights(
        old - rollout, mask, rollout_is="token", rollout_is_threshold="0.7_1.6"
    )
    kept, _ = rollout_corr.compute_rollout_rejection_mask(
        old - rollout, mask, rollout_rs="token_k1", rollout_rs_threshold=f"{1 / 1.6}_{1 / 0.7}"
    )
    config = actor_config(**clip_config(0.2, 0.2, clip_ratio_c=3.0))
    theirs, _ = core_algos.compute_policy_loss_vanilla(
        old, base.log_probs, base.advantages, kept, "token-mean", config, weights
    )
    assert_close(ours.loss.detach(), theirs.detach())
    # IcePop alone (mask unchanged) keeps rejected tokens in the token count: a different, smaller loss scale.
    icepop, _ = core_algos.compute_policy_loss_vanilla(
        old, base.log_probs, base.advantages, mask, "token-mean", config, weights
    )
    assert_close(ours.loss.detach() * kept.sum() / mask.sum(), icepop.detach())


def test_verl_icepop_crashes_when_every_token_is_rejected_and_ours_does_not(rollout_corr: ModuleType) -> None:
    # verl's effective-sample-size metric divides by the mean squared weight, 0 when everything is rejected.
    old, rollout, mask = _rollout_batch(0, 4)
    with pytest.raises(ZeroDivisionError):
        rollout_corr.compute_rollout_correction_weights(
            old - rollout + 5.0, mask, rollout_is="sequence", rollout_is_threshold="0.5_2.0"
        )
    ours = rollout_correction(old + 5.0, rollout, mask, mode="mis", level="sequence", upper=2.0, lower=0.5)
    assert not bool(ours.weights.any())
    assert not bool(ours.response_mask.any())
    assert ours.metrics["rollout_is_masked_fraction"].item() == 1.0
