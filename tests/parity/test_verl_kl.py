"""rl-core's KL estimators, reward penalty, KL loss and KL controllers against verl 0.9.1.

verl's `apply_kl_penalty` lives in `verl.trainer.ppo.ray_trainer`, whose imports pull in Ray and the rollout
stack; it is not importable in a Ray-free venv. The tests therefore compile that one function from verl's own
source file (located through the import system, not copied) with the names it uses (`DataProto`,
`core_algos`, `masked_mean`, `torch`) and feed it a real `DataProto`.

Deliberate differences from verl, each pinned below rather than hidden:

- k3 is computed as `expm1(log r) - log r` instead of `exp(log r) - log r - 1`: the same value (parity holds
  in float64), without the cancellation that makes verl's form inaccurate, even negative, in float32 when
  π ≈ π_ref.
- The reward-KL metric averages the per-sequence mean KL over sequences with at least one response token;
  verl averages over all B rows, so an empty row counts as KL 0 and dilutes the metric fed to the controller.
  Parity batches give every row at least one token.
- A NaN/inf estimate under a zero mask never reaches our rewards; verl multiplies by the mask, so NaN leaks.
- `AdaptiveKLController.update` refuses `n_steps >= horizon / 0.2`, where verl's multiplier can reach zero or
  go negative (a negative coefficient rewards divergence from the reference). Parity updates stay below.
- verl's name "full" raises NotImplementedError; it is not registered here (an UnknownNameError).
"""

from __future__ import annotations

import ast
import importlib.util
from types import ModuleType

import pytest
import torch

from rl_core.kl import AdaptiveKLController, FixedKLController, apply_kl_penalty, get_kl_estimator, k3, kl_loss
from tests.parity.conftest import PARITY_TOLERANCE

DTYPE = torch.float64
LENGTH = 7
SEEDS = range(3)
BATCH_SIZES = [1, 4, 16]
BASE_NAMES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"]
VERL_NAMES = BASE_NAMES + [name + "+" for name in BASE_NAMES]
# Spread of log π - log π_ref: near-equal policies, typical drift, and far enough to hit k3's caps.
SPREADS = [0.01, 1.0, 15.0]
AGGREGATIONS = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


def _log_probs(seed: int, size: int, spread: float, dtype: torch.dtype = DTYPE) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    log_probs = -6.0 * torch.rand(size, LENGTH, generator=gen, dtype=DTYPE)
    ref_log_probs = log_probs + spread * torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    return log_probs.to(dtype), ref_log_probs.to(dtype)


def _mask(seed: int, size: int, *, min_length: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed + 1000)
    lengths = torch.randint(min_length, LENGTH + 1, (size,), generator=gen)
    return (torch.arange(LENGTH) < lengths.unsqueeze(-1)).to(torch.int64)


def _scores(seed: int, size: int) -> torch.Tensor:
    return torch.randn(size, LENGTH, generator=torch.Generator().manual_seed(seed + 2000), dtype=DTYPE)


def _value_and_grads(fn, log_probs: torch.Tensor, ref_log_probs: torch.Tensor):
    log_probs = log_probs.clone().requires_grad_(True)
    ref_log_probs = ref_log_probs.clone().requires_grad_(True)
    value = fn(log_probs, ref_log_probs)
    # A weighted sum, so the backward pass sees a different upstream gradient at every token.
    weights = torch.linspace(0.5, 1.5, value.numel(), dtype=value.dtype).reshape(value.shape)
    (value * weights).sum().backward()
    return value.detach(), log_probs.grad, ref_log_probs.grad


def _close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs.to(ours.dtype), rtol=0.0, atol=PARITY_TOLERANCE)


@pytest.fixture(scope="module")
def verl_apply_kl_penalty(core_algos: ModuleType):
    """verl's `ray_trainer.apply_kl_penalty`, compiled from its source without importing Ray."""
    from verl import DataProto
    from verl.utils.torch_functional import masked_mean

    spec = importlib.util.find_spec("verl.trainer.ppo.ray_trainer")
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename=spec.origin)
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "apply_kl_penalty"]
    namespace = {"DataProto": DataProto, "core_algos": core_algos, "masked_mean": masked_mean, "torch": torch}
    exec(compile(ast.Module(body=[node], type_ignores=[]), spec.origin, "exec"), namespace)
    return namespace["apply_kl_penalty"]


def _verl_penalty(verl_apply_kl_penalty, scores, log_probs, ref_log_probs, mask, controller, name):
    from verl import DataProto

    data = DataProto.from_dict(
        tensors={
            "token_level_scores": scores,
            "old_log_probs": log_probs,
            "ref_log_prob": ref_log_probs,
            "response_mask": mask,
        }
    )
    data, metrics = verl_apply_kl_penalty(data, controller, kl_penalty=name)
    return data.batch["token_level_rewards"], metrics


@pytest.mark.parametrize("name", VERL_NAMES)
@pytest.mark.parametrize("spread", SPREADS)
@pytest.mark.parametrize("seed", SEEDS)
def test_estimator_values_and_gradients_match(core_algos: ModuleType, name: str, spread: float, seed: int) -> None:
    log_probs, ref_log_probs = _log_probs(seed, 6, spread)
    ours = _value_and_grads(get_kl_estimator(name), log_probs, ref_log_probs)
    theirs = _value_and_grads(lambda p, q: core_algos.kl_penalty(p, q, kl_penalty=name), log_probs, ref_log_probs)
    for mine, verls in zip(ours, theirs, strict=True):
        _close(mine, verls)


@pytest.mark.parametrize("name", VERL_NAMES)
@pytest.mark.parametrize("size", BATCH_SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_apply_kl_penalty_and_adaptive_update_match(
    core_algos: ModuleType, verl_apply_kl_penalty, name: str, size: int, seed: int
) -> None:
    log_probs, ref_log_probs = _log_probs(seed, size, SPREADS[seed % len(SPREADS)])
    scores, mask = _scores(seed, size), _mask(seed, size)
    theirs_ctrl = core_algos.AdaptiveKLController(init_kl_coef=0.2, target_kl=0.1, horizon=1000)
    ours_ctrl = AdaptiveKLController(init_kl_coef=0.2, target_kl=0.1, horizon=1000)

    rewards, metrics = _verl_penalty(verl_apply_kl_penalty, scores, log_probs, ref_log_probs, mask, theirs_ctrl, name)
    out = apply_kl_penalty(scores, log_probs, ref_log_probs, mask, kl_coef=ours_ctrl.value, estimator=name)
    ours_ctrl.update(out.metrics["actor/reward_kl_penalty"], n_steps=size)

    _close(out.token_level_rewards, rewards)
    _close(out.kl, core_algos.kl_penalty(log_probs, ref_log_probs, kl_penalty=name) * mask)
    assert set(out.metrics) == set(metrics)
    for key, value in metrics.items():
        assert out.metrics[key] == pytest.approx(float(value), rel=0.0, abs=PARITY_TOLERANCE), key
    assert ours_ctrl.value == pytest.approx(float(theirs_ctrl.value), rel=0.0, abs=PARITY_TOLERANCE)


@pytest.mark.parametrize("seed", SEEDS)
def test_fixed_controller_matches(core_algos: ModuleType, verl_apply_kl_penalty, seed: int) -> None:
    log_probs, ref_log_probs = _log_probs(seed, 4, 1.0)
    scores, mask = _scores(seed, 4), _mask(seed, 4)
    theirs_ctrl, ours_ctrl = core_algos.FixedKLController(kl_coef=0.05), FixedKLController(0.05)
    rewards, metrics = _verl_penalty(verl_apply_kl_penalty, scores, log_probs, ref_log_probs, mask, theirs_ctrl, "kl")
    out = apply_kl_penalty(scores, log_probs, ref_log_probs, mask, kl_coef=ours_ctrl.value)
    ours_ctrl.update(out.metrics["actor/reward_kl_penalty"], n_steps=4)
    _close(out.token_level_rewards, rewards)
    assert out.metrics["actor/reward_kl_penalty_coeff"] == metrics["actor/reward_kl_penalty_coeff"]
    assert ours_ctrl.value == theirs_ctrl.value == 0.05


@pytest.mark.parametrize("seed", SEEDS)
def test_adaptive_controller_sequence_matches(core_algos: ModuleType, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    target, horizon = 0.05, 2000
    theirs = core_algos.AdaptiveKLController(init_kl_coef=0.1, target_kl=target, horizon=horizon)
    ours = AdaptiveKLController(0.1, target, horizon)
    for _ in range(200):
        current_kl = float(torch.rand((), generator=gen, dtype=DTYPE)) * 3 * target
        n_steps = int(torch.randint(0, 5 * horizon, (), generator=gen))
        theirs.update(current_kl=current_kl, n_steps=n_steps)
        ours.update(current_kl, n_steps)
        assert ours.value == pytest.approx(float(theirs.value), rel=PARITY_TOLERANCE, abs=PARITY_TOLERANCE)


@pytest.mark.parametrize("name", VERL_NAMES)
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("seed", SEEDS)
def test_kl_loss_matches_verl_kl_penalty_and_agg_loss(
    core_algos: ModuleType, name: str, aggregation: str, seed: int
) -> None:
    # Rows may be empty here: both sides drop fully masked sequences from the sequence counts.
    log_probs, ref_log_probs = _log_probs(seed, 8, SPREADS[seed % len(SPREADS)])
    mask = _mask(seed, 8, min_length=0)
    mask[0, 0] = 1

    def ours(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return kl_loss(p, q, mask, estimator=name, aggregation=aggregation)

    def theirs(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        per_token = core_algos.kl_penalty(p, q, kl_penalty=name)
        return core_algos.agg_loss(loss_mat=per_token, loss_mask=mask.to(DTYPE), loss_agg_mode=aggregation)

    for mine, verls in zip(
        _value_and_grads(ours, log_probs, ref_log_probs),
        _value_and_grads(theirs, log_probs, ref_log_probs),
        strict=True,
    ):
        _close(mine, verls)


def test_k3_stays_non_negative_in_float32_where_verl_goes_negative(core_algos: ModuleType) -> None:
    log_probs, ref_log_probs = _log_probs(0, 64, 1e-3, dtype=torch.float32)
    exact = k3(log_probs.double(), ref_log_probs.double())
    verl_value = core_algos.kl_penalty(log_probs, ref_log_probs, kl_penalty="k3")
    ours = k3(log_probs, ref_log_probs)
    assert bool((verl_value < 0).any())
    assert bool((ours >= 0).all())
    assert (ours.double() - exact).abs().max() < (verl_value.double() - exact).abs().max()


def test_empty_rows_dilute_verls_kl_metric_but_not_ours(core_algos: ModuleType, verl_apply_kl_penalty) -> None:
    log_probs, ref_log_probs = _log_probs(1, 4, 1.0)
    scores, mask = _scores(1, 4), _mask(1, 4)
    mask[3] = 0
    controller = core_algos.FixedKLController(kl_coef=0.1)
    _, metrics = _verl_penalty(verl_apply_kl_penalty, scores, log_probs, ref_log_probs, mask, controller, "kl")
    out = apply_kl_penalty(scores, log_probs, ref_log_probs, mask, kl_coef=0.1)
    ours = out.metrics["actor/reward_kl_penalty"]
    assert ours != 0.0
    assert float(metrics["actor/reward_kl_penalty"]) == pytest.approx(ours * 3 / 4, abs=PARITY_TOLERANCE)


def test_nan_off_the_mask_leaks_into_verls_rewards_but_not_ours(core_algos: ModuleType, verl_apply_kl_penalty) -> None:
    log_probs, ref_log_probs = _log_probs(2, 4, 1.0)
    scores, mask = _scores(2, 4), _mask(2, 4)
    mask[0, -1] = 0
    ref_log_probs[0, -1] = float("nan")
    controller = core_algos.FixedKLController(kl_coef=0.1)
    rewards, _ = _verl_penalty(verl_apply_kl_penalty, scores, log_probs, ref_log_probs, mask, controller, "kl")
    out = apply_kl_penalty(scores, log_probs, ref_log_probs, mask, kl_coef=0.1)
    assert bool(rewards[0, -1].isnan())
    assert out.token_level_rewards[0, -1].item() == scores[0, -1].item()


def test_verls_adaptive_coefficient_can_go_negative_where_ours_refuses(core_algos: ModuleType) -> None:
    theirs = core_algos.AdaptiveKLController(init_kl_coef=0.1, target_kl=1.0, horizon=100)
    theirs.update(current_kl=0.0, n_steps=1000)
    assert theirs.value < 0
    with pytest.raises(ValueError, match=r"n_steps must be < horizon / 0\.2"):
        AdaptiveKLController(0.1, target_kl=1.0, horizon=100).update(0.0, 1000)
