"""rl-core's losses, aggregation and rollout correction against verl 0.9.1 on random ragged batches.

Compared in float64 to PARITY_TOLERANCE: loss, gradient with respect to `log_probs`, and verl's metrics
(`actor/<name>`). Deliberate differences from verl, each pinned by a test below rather than hidden:

- clip_cov draws its dropped tokens with `torch.randperm` on the global CPU generator, as verl does: the
  tests seed it identically before each call, so the random choice is compared exactly.
- sapo: verl ignores `loss_agg_mode` and always aggregates with "seq-mean-token-mean"; ours honours
  `aggregation`. Parity runs use "seq-mean-token-mean"; `test_sapo_verl_ignores_the_aggregation_mode`.
- geo_mean: verl ignores `loss_agg_mode` and takes `torch.mean` over every row, empty ones included (not
  additive over micro-batches); ours puts each sequence's loss on its tokens and aggregates, so
  "seq-mean-token-mean" equals verl on batches without empty rows; `test_geo_mean_verl_counts_empty_rows`.
- kl_cov: verl logs the mean |log-ratio| under `actor/ppo_kl`; ours keeps `ppo_kl`'s meaning (mean of old
  minus new) and reports the absolute one as `ppo_kl_abs`.
- Global normalisation: verl multiplies each rank's loss by `dp_size` (DDP then averages the ranks); ours
  returns each part's share of the global loss, so the parts sum to it. `test_global_batch_...`.
- Masked IS: verl has two pieces, IcePop weights (zero outside `[lower, upper]`, mask unchanged, so
  rejected tokens still count in the normaliser) and the `token_k1`/`seq_sum_k1` rejection mask, whose
  bounds apply to `pi_rollout / pi_train` (the k1 statistic), the reciprocal of the IS ratio. Our "mis"
  gives IcePop's weights and verl's rejection mask with reciprocal thresholds, and the wrapped loss treats
  rejected tokens as padding (verl's rejection-sampling semantics). At sequence level verl's
  out-of-bounds fraction counts empty rows in its denominator; ours counts non-empty sequences.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
import torch

from rl_core.losses import (
    LossNormalizer,
    PolicyLossInputs,
    aggregate_loss,
    clipped_value_loss,
    get_policy_loss,
    rollout_correction,
    with_rollout_correction,
)
from tests.parity.conftest import PARITY_TOLERANCE

DTYPE = torch.float64
LENGTH = 9
SEEDS = range(3)
BATCH_SIZES = [1, 4, 16]
AGGREGATIONS = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
HOLE_RATE = 0.2
SPIKE_RATE = 0.05
SPIKE = 25.0  # beyond verl's +-20 log-ratio clamp
CLIP_COV_SEED = 1234


def _inputs(
    seed: int,
    size: int,
    *,
    empty_rows: bool = True,
    spikes: bool = True,
    weights: bool = False,
    sequence_advantages: bool = False,
) -> PolicyLossInputs:
    """Ragged lengths (empty rows allowed), a few holes, finite junk off the mask, optional log-ratio spikes."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0 if empty_rows else 1, LENGTH + 1, (size,), generator=gen)
    mask = torch.arange(LENGTH) < lengths.unsqueeze(-1)
    mask &= torch.rand(size, LENGTH, generator=gen) > HOLE_RATE
    mask[:, 0] |= lengths > 0
    mask[0, 0] = True
    old = -3.0 * torch.rand(size, LENGTH, generator=gen, dtype=DTYPE)
    current = old + 0.3 * torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    if spikes:
        spiked = torch.rand(size, LENGTH, generator=gen) < SPIKE_RATE
        signs = torch.where(torch.rand(size, LENGTH, generator=gen) < 0.5, -SPIKE, SPIKE).to(DTYPE)
        current = torch.where(spiked, old + signs, current)
    if sequence_advantages:
        advantages = torch.randn(size, 1, generator=gen, dtype=DTYPE).expand(size, LENGTH).clone()
    else:
        advantages = torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    is_weights = 0.1 + 2.0 * torch.rand(size, LENGTH, generator=gen, dtype=DTYPE) if weights else None
    return PolicyLossInputs(current, old, advantages, mask.to(DTYPE), rollout_is_weights=is_weights)


def _actor_config(**settings: Any) -> Any:
    """verl's ActorConfig with explicit clip ratios and policy-loss settings."""
    from verl.workers.config import ActorConfig, PolicyLossConfig

    policy_loss = PolicyLossConfig(**settings.pop("policy_loss", {}))
    return ActorConfig(
        strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, policy_loss=policy_loss, **settings
    )


@dataclass
class Case:
    """One of our losses with its parameters, and verl's loss name and config for the same setting."""

    ours: str
    params: dict[str, Any]
    verl: str
    config: dict[str, Any]
    aggregations: list[str] = field(default_factory=lambda: AGGREGATIONS)
    # Our metric name -> verl's key (None: verl has no equal metric).
    metrics: dict[str, str | None] = field(default_factory=dict)
    empty_rows: bool = True
    sequence_advantages: bool = False

    def __str__(self) -> str:
        return f"{self.ours}-{self.params}"


def _clip(low: float, high: float, **extra: Any) -> dict[str, Any]:
    return {"clip_ratio": low, "clip_ratio_low": low, "clip_ratio_high": high, **extra}


CASES = [
    Case("ppo", {"clip_ratio": 0.2}, "vanilla", _clip(0.2, 0.2, clip_ratio_c=3.0)),
    Case(
        "ppo",
        {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 1.5},
        "vanilla",
        _clip(0.2, 0.28, clip_ratio_c=1.5),
    ),
    Case("gspo", {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4}, "gspo", _clip(3e-4, 4e-4)),
    Case("gspo", {"clip_ratio_low": 0.1, "clip_ratio_high": 0.2}, "gspo", _clip(0.1, 0.2)),
    Case("cispo", {"clip_ratio": 0.2}, "cispo", _clip(0.2, 0.2)),
    Case("cispo", {"clip_ratio_low": 10.0, "clip_ratio_high": 0.28}, "cispo", _clip(10.0, 0.28)),
    Case(
        "sapo",
        {"tau_pos": 1.0, "tau_neg": 1.05},
        "sapo",
        {"tau_pos": 1.0, "tau_neg": 1.05},
        aggregations=["seq-mean-token-mean"],
    ),
    Case("sapo", {"tau_pos": 2.0, "tau_neg": 3.0}, "sapo", {"tau_pos": 2.0, "tau_neg": 3.0}, ["seq-mean-token-mean"]),
    Case("gpg", {}, "gpg", {}),
    Case(
        "clip_cov",
        {"clip_ratio": 0.2, "clip_cov_ratio": 0.2, "clip_cov_lb": 0.0, "clip_cov_ub": 5.0},
        "clip_cov",
        _clip(0.2, 0.2, policy_loss={"clip_cov_ratio": 0.2, "clip_cov_lb": 0.0, "clip_cov_ub": 5.0}),
    ),
    Case(
        "kl_cov",
        {"kl_cov_ratio": 0.2, "ppo_kl_coef": 1.0},
        "kl_cov",
        {"policy_loss": {"kl_cov_ratio": 0.2, "ppo_kl_coef": 1.0}},
        metrics={"ppo_kl": None, "ppo_kl_abs": "actor/ppo_kl"},
    ),
    Case(
        "geo_mean",
        {"clip_ratio": 0.4},
        "geo_mean",
        _clip(0.4, 0.4),
        aggregations=["seq-mean-token-mean"],
        empty_rows=False,
        sequence_advantages=True,
    ),
    Case(
        "geo_mean",
        {"clip_ratio_low": 0.2, "clip_ratio_high": 0.6},
        "geo_mean",
        _clip(0.2, 0.6),
        aggregations=["seq-mean-token-mean"],
        empty_rows=False,
    ),
]


def _first(name: str) -> Case:
    return next(case for case in CASES if case.ours == name)


def _close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs.to(ours.dtype), atol=PARITY_TOLERANCE, rtol=PARITY_TOLERANCE)


def _run_ours(case: Case, inputs: PolicyLossInputs, aggregation: str) -> tuple[Any, torch.Tensor]:
    current = inputs.log_probs.detach().clone().requires_grad_(True)
    fresh = PolicyLossInputs(
        current, inputs.old_log_probs, inputs.advantages, inputs.response_mask, inputs.rollout_is_weights
    )
    torch.manual_seed(CLIP_COV_SEED)
    out = get_policy_loss(case.ours)(fresh, aggregation=aggregation, **case.params)
    out.loss.backward()
    assert current.grad is not None
    return out, current.grad


def _run_verl(
    core_algos: ModuleType, case: Case, inputs: PolicyLossInputs, aggregation: str
) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
    current = inputs.log_probs.detach().clone().requires_grad_(True)
    torch.manual_seed(CLIP_COV_SEED)
    loss, metrics = core_algos.get_policy_loss_fn(case.verl)(
        inputs.old_log_probs.clone(),
        current,
        inputs.advantages.clone(),
        inputs.response_mask.clone(),
        aggregation,
        _actor_config(**case.config),
        inputs.rollout_is_weights,
    )
    loss.backward()
    assert current.grad is not None
    return loss.detach(), metrics, current.grad


def _compare(core_algos: ModuleType, case: Case, inputs: PolicyLossInputs, aggregation: str) -> None:
    ours, our_grad = _run_ours(case, inputs, aggregation)
    loss, metrics, grad = _run_verl(core_algos, case, inputs, aggregation)
    _close(ours.loss.detach(), loss)
    _close(our_grad, grad)
    for name, value in ours.metrics.items():
        key = case.metrics.get(name, f"actor/{name}")
        if key is not None:
            assert value.item() == pytest.approx(metrics[key], rel=PARITY_TOLERANCE, abs=PARITY_TOLERANCE), name


def _loss_cases() -> list[Any]:
    return [
        pytest.param(case, aggregation, id=f"{case}-{aggregation}")
        for case in CASES
        for aggregation in case.aggregations
    ]


@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("case", "aggregation"), _loss_cases())
def test_policy_loss_matches_verl(core_algos: ModuleType, case: Case, aggregation: str, seed: int, size: int) -> None:
    inputs = _inputs(seed, size, empty_rows=case.empty_rows, sequence_advantages=case.sequence_advantages)
    _compare(core_algos, case, inputs, aggregation)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", [pytest.param(case, id=str(case)) for case in CASES])
def test_policy_loss_with_rollout_is_weights_matches_verl(core_algos: ModuleType, case: Case, seed: int) -> None:
    inputs = _inputs(seed, 8, empty_rows=case.empty_rows, weights=True, sequence_advantages=case.sequence_advantages)
    _compare(core_algos, case, inputs, case.aggregations[0])


def test_sapo_verl_ignores_the_aggregation_mode(core_algos: ModuleType) -> None:
    case = _first("sapo")
    inputs = _inputs(0, 8)
    loss, _, _ = _run_verl(core_algos, case, inputs, "token-mean")
    ours_token_mean, _ = _run_ours(case, inputs, "token-mean")
    ours_seq_mean, _ = _run_ours(case, inputs, "seq-mean-token-mean")
    _close(ours_seq_mean.loss.detach(), loss)
    assert abs(ours_token_mean.loss.item() - loss.item()) > 1e-3


def test_geo_mean_verl_counts_empty_rows(core_algos: ModuleType) -> None:
    case = _first("geo_mean")
    base = _inputs(1, 8, sequence_advantages=True)
    mask = base.response_mask.clone()
    mask[3] = 0
    inputs = PolicyLossInputs(base.log_probs, base.old_log_probs, base.advantages, mask)
    nonempty = int(inputs.mask.any(dim=-1).sum())
    assert nonempty < 8
    loss, _, _ = _run_verl(core_algos, case, inputs, "seq-mean-token-mean")
    ours, _ = _run_ours(case, inputs, "seq-mean-token-mean")
    # verl averages over all 8 rows; ours over the non-empty sequences.
    _close(ours.loss.detach() * nonempty / 8, loss)


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_agg_loss_matches_verl(core_algos: ModuleType, aggregation: str, seed: int, size: int) -> None:
    inputs = _inputs(seed, size)
    loss = torch.randn(size, LENGTH, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    ours = aggregate_loss(loss, inputs.response_mask, aggregation)
    _close(ours, core_algos.agg_loss(loss, inputs.response_mask, aggregation))


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("seed", SEEDS)
def test_global_batch_normalisation_matches_verl_up_to_dp_size(
    core_algos: ModuleType, aggregation: str, seed: int
) -> None:
    # Two ranks of 5 sequences, a global horizon of 12; verl's rank losses are dp_size times our shares.
    inputs = _inputs(seed, 10)
    loss = torch.randn(10, LENGTH, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    norm = LossNormalizer.from_mask(inputs.response_mask, horizon=12)
    global_info = {
        "dp_size": 2,
        "batch_num_tokens": norm.num_tokens,
        "global_batch_size": norm.num_sequences,
        "loss_scale_factor": 12,
    }
    shares = []
    for rows in (slice(0, 5), slice(5, 10)):
        ours = aggregate_loss(loss[rows], inputs.response_mask[rows], aggregation, norm)
        theirs = core_algos.agg_loss(loss[rows], inputs.response_mask[rows], aggregation, **global_info)
        _close(ours * 2, theirs)
        shares.append(ours)
    _close(sum(shares), aggregate_loss(loss, inputs.response_mask, aggregation, norm))


@pytest.mark.parametrize("seed", SEEDS)
def test_global_batch_info_reaches_verls_policy_loss_the_same_way(core_algos: ModuleType, seed: int) -> None:
    inputs = _inputs(seed, 10)
    norm = LossNormalizer.from_mask(inputs.response_mask)
    info = {"dp_size": 2, "batch_num_tokens": norm.num_tokens, "global_batch_size": norm.num_sequences}
    case = CASES[1]  # ppo with clip-higher and a tight dual clip
    for rows in (slice(0, 5), slice(5, 10)):
        part = PolicyLossInputs(
            inputs.log_probs[rows], inputs.old_log_probs[rows], inputs.advantages[rows], inputs.response_mask[rows]
        )
        ours = get_policy_loss("ppo")(part, normalizer=norm, **case.params).loss
        config = _actor_config(**case.config)
        config.global_batch_info.update(info)
        theirs, _ = core_algos.compute_policy_loss_vanilla(
            part.old_log_probs, part.log_probs, part.advantages, part.response_mask, "token-mean", config
        )
        _close(ours.detach() * 2, theirs.detach())


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_value_loss_matches_verl(core_algos: ModuleType, aggregation: str, seed: int, size: int) -> None:
    gen = torch.Generator().manual_seed(seed + 100)
    mask = _inputs(seed, size).response_mask
    old_values = torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    values = (old_values + 0.5 * torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)).requires_grad_(True)
    returns = torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    ours = clipped_value_loss(values, old_values, returns, mask, clip_range=0.3, aggregation=aggregation)
    (our_grad,) = torch.autograd.grad(ours.loss, values)
    theirs, clipfrac = core_algos.compute_value_loss(values, returns, old_values, mask, 0.3, aggregation)
    (their_grad,) = torch.autograd.grad(theirs, values)
    _close(ours.loss.detach(), theirs.detach())
    _close(our_grad, their_grad)
    _close(ours.clipfrac, clipfrac)


@pytest.fixture(scope="module")
def rollout_corr(core_algos: ModuleType) -> ModuleType:
    """verl's `rollout_corr_helper` (importable wherever `core_algos` is)."""
    return importlib.import_module("verl.trainer.ppo.rollout_corr_helper")


def _rollout_batch(seed: int, size: int, *, empty_rows: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(old_log_probs, rollout_log_probs, mask): an engine whose log-probs differ by N(0, 0.4^2) noise."""
    inputs = _inputs(seed, size, empty_rows=empty_rows, spikes=False)
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
    _close(ours.weights, weights)
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
    _close(ours.weights, weights)
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
    base = _inputs(seed, 8)
    inputs = PolicyLossInputs(base.log_probs, old, base.advantages, mask, rollout_log_probs=rollout)
    ours = with_rollout_correction("ppo", mode="mis", upper=1.6, lower=0.7)(inputs, clip_ratio=0.2)
    weights, _ = rollout_corr.compute_rollout_correction_weights(
        old - rollout, mask, rollout_is="token", rollout_is_threshold="0.7_1.6"
    )
    kept, _ = rollout_corr.compute_rollout_rejection_mask(
        old - rollout, mask, rollout_rs="token_k1", rollout_rs_threshold=f"{1 / 1.6}_{1 / 0.7}"
    )
    config = _actor_config(**_first("ppo").config)
    theirs, _ = core_algos.compute_policy_loss_vanilla(
        old, base.log_probs, base.advantages, kept, "token-mean", config, weights
    )
    _close(ours.loss.detach(), theirs.detach())
    # IcePop alone (mask unchanged) keeps rejected tokens in the token count: a different, smaller loss scale.
    icepop, _ = core_algos.compute_policy_loss_vanilla(
        old, base.log_probs, base.advantages, mask, "token-mean", config, weights
    )
    _close(ours.loss.detach() * kept.sum() / mask.sum(), icepop.detach())


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
