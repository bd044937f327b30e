"""rl-core's losses and aggregation against verl 0.9.1 on random ragged batches.

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

Rollout correction (TIS, MIS) is compared in test_verl_rollout_correction.py.
"""

from __future__ import annotations

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
)
from tests.parity._policy_inputs import (
    AGGREGATIONS,
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

CLIP_COV_SEED = 1234


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


CASES = [
    Case("ppo", {"clip_ratio": 0.2}, "vanilla", clip_config(0.2, 0.2, clip_ratio_c=3.0)),
    Case(
        "ppo",
        {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 1.5},
        "vanilla",
        clip_config(0.2, 0.28, clip_ratio_c=1.5),
    ),
    Case("gspo", {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4}, "gspo", clip_config(3e-4, 4e-4)),
    Case("gspo", {"clip_ratio_low": 0.1, "clip_ratio_high": 0.2}, "gspo", clip_config(0.1, 0.2)),
    Case("cispo", {"clip_ratio": 0.2}, "cispo", clip_config(0.2, 0.2)),
    Case("cispo", {"clip_ratio_low": 10.0, "clip_ratio_high": 0.28}, "cispo", clip_config(10.0, 0.28)),
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
        clip_config(0.2, 0.2, policy_loss={"clip_cov_ratio": 0.2, "clip_cov_lb": 0.0, "clip_cov_ub": 5.0}),
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
        clip_config(0.4, 0.4),
        aggregations=["seq-mean-token-mean"],
        empty_rows=False,
        sequence_advantages=True,
    ),
    Case(
        "geo_mean",
        {"clip_ratio_low": 0.2, "clip_ratio_high": 0.6},
        "geo_mean",
        clip_config(0.2, 0.6),
        aggregations=["seq-mean-token-mean"],
        empty_rows=False,
    ),
]


def _first(name: str) -> Case:
    return next(case for case in CASES if case.ours == name)


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
        actor_config(**case.config),
        inputs.rollout_is_weights,
    )
    loss.backward()
    assert current.grad is not None
    return loss.detach(), metrics, current.grad


def _compare(core_algos: ModuleType, case: Case, inputs: PolicyLossInputs, aggregation: str) -> None:
    ours, our_grad = _run_ours(case, inputs, aggregation)
    loss, metrics, grad = _run_verl(core_algos, case, inputs, aggregation)
    assert_close(ours.loss.detach(), loss)
    assert_close(our_grad, grad)
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
    inputs = policy_inputs(seed, size, empty_rows=case.empty_rows, sequence_advantages=case.sequence_advantages)
    _compare(core_algos, case, inputs, aggregation)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", [pytest.param(case, id=str(case)) for case in CASES])
def test_policy_loss_with_rollout_is_weights_matches_verl(core_algos: ModuleType, case: Case, seed: int) -> None:
    inputs = policy_inputs(
        seed, 8, empty_rows=case.empty_rows, weights=True, sequence_advantages=case.sequence_advantages
    )
    _compare(core_algos, case, inputs, case.aggregations[0])


def test_sapo_verl_ignores_the_aggregation_mode(core_algos: ModuleType) -> None:
    case = _first("sapo")
    inputs = policy_inputs(0, 8)
    loss, _, _ = _run_verl(core_algos, case, inputs, "token-mean")
    ours_token_mean, _ = _run_ours(case, inputs, "token-mean")
    ours_seq_mean, _ = _run_ours(case, inputs, "seq-mean-token-mean")
    assert_close(ours_seq_mean.loss.detach(), loss)
    assert abs(ours_token_mean.loss.item() - loss.item()) > 1e-3


def test_geo_mean_verl_counts_empty_rows(core_algos: ModuleType) -> None:
    case = _first("geo_mean")
    base = policy_inputs(1, 8, sequence_advantages=True)
    mask = base.response_mask.clone()
    mask[3] = 0
    inputs = PolicyLossInputs(base.log_probs, base.old_log_probs, base.advantages, mask)
    nonempty = int(inputs.mask.any(dim=-1).sum())
    assert nonempty < 8
    loss, _, _ = _run_verl(core_algos, case, inputs, "seq-mean-token-mean")
    ours, _ = _run_ours(case, inputs, "seq-mean-token-mean")
    # verl averages over all 8 rows; ours over the non-empty sequences.
    assert_close(ours.loss.detach() * nonempty / 8, loss)


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_agg_loss_matches_verl(core_algos: ModuleType, aggregation: str, seed: int, size: int) -> None:
    inputs = policy_inputs(seed, size)
    loss = torch.randn(size, LENGTH, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    ours = aggregate_loss(loss, inputs.response_mask, aggregation)
    assert_close(ours, core_algos.agg_loss(loss, inputs.response_mask, aggregation))


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("seed", SEEDS)
def test_global_batch_normalisation_matches_verl_up_to_dp_size(
    core_algos: ModuleType, aggregation: str, seed: int
) -> None:
    # Two ranks of 5 sequences, a global horizon of 12; verl's rank losses are dp_size times our shares.
    inputs = policy_inputs(seed, 10)
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
        assert_close(ours * 2, theirs)
        shares.append(ours)
    assert_close(sum(shares), aggregate_loss(loss, inputs.response_mask, aggregation, norm))


@pytest.mark.parametrize("seed", SEEDS)
def test_global_batch_info_reaches_verls_policy_loss_the_same_way(core_algos: ModuleType, seed: int) -> None:
    inputs = policy_inputs(seed, 10)
    norm = LossNormalizer.from_mask(inputs.response_mask)
    info = {"dp_size": 2, "batch_num_tokens": norm.num_tokens, "global_batch_size": norm.num_sequences}
    case = CASES[1]  # ppo with clip-higher and a tight dual clip
    for rows in (slice(0, 5), slice(5, 10)):
        part = PolicyLossInputs(
            inputs.log_probs[rows], inputs.old_log_probs[rows], inputs.advantages[rows], inputs.response_mask[rows]
        )
        ours = get_policy_loss("ppo")(part, normalizer=norm, **case.params).loss
        config = actor_config(**case.config)
        config.global_batch_info.update(info)
        theirs, _ = core_algos.compute_policy_loss_vanilla(
            part.old_log_probs, part.log_probs, part.advantages, part.response_mask, "token-mean", config
        )
        assert_close(ours.detach() * 2, theirs.detach())


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_value_loss_matches_verl(core_algos: ModuleType, aggregation: str, seed: int, size: int) -> None:
    gen = torch.Generator().manual_seed(seed + 100)
    mask = policy_inputs(seed, size).response_mask
    old_values = torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    values = (old_values + 0.5 * torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)).requires_grad_(True)
    returns = torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    ours = clipped_value_loss(values, old_values, returns, mask, clip_range=0.3, aggregation=aggregation)
    (our_grad,) = torch.autograd.grad(ours.loss, values)
    theirs, clipfrac = core_algos.compute_value_loss(values, returns, old_values, mask, 0.3, aggregation)
    (their_grad,) = torch.autograd.grad(theirs, values)
    assert_close(ours.loss.detach(), theirs.detach())
    assert_close(our_grad, their_grad)
    assert_close(ours.clipfrac, clipfrac)
