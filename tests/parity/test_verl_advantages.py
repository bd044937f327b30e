"""rl-core's advantage estimators against verl 0.9.1's `core_algos` on random ragged batches.

Deliberate differences from verl, each checked below rather than hidden:

- Outcome scores: verl sums `token_level_rewards` over *every* position, padding included; we sum over the
  response mask only, so a reward under a zero mask never matters. Parity inputs therefore keep rewards at
  zero off the mask, and `test_we_ignore_rewards_under_the_mask_where_verl_does_not` pins the difference.
- GAE: verl whitens the advantages inside `compute_gae_advantage_return`; our `gae` does not (PPO applies
  `whiten` where it wants it), so we compare `whiten(gae(...).advantages)`. Both skip masked steps (the
  TD chain bootstraps from the next *response* token, which is right for multi-turn observation spans).
  verl leaves non-zero numbers on masked positions (returns = values on padding, the carried advantage
  inside observation spans); ours are zero there, so the comparison is on the mask and ours is checked zero
  off it. ReMax's returns are the same story.
- RLOO singletons: verl's `rloo` keeps a singleton's reward (baseline 0) while `rloo_vectorized` zeroes it;
  we follow `rloo`, so `rloo_vectorized` is compared on groups of two or more, and the singleton case is
  pinned in `test_rloo_singletons_follow_verl_rloo_not_rloo_vectorized`.
- OPO: verl divides by the group's total response length, NaN when every response of a group is empty;
  ours gives baseline 0 there. Parity inputs give every response at least one token.
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace

import pytest
import torch

from rl_core.advantages import (
    AdvantageInputs,
    gae,
    gpg,
    grpo,
    grpo_passk,
    opo,
    reinforce_plus_plus,
    reinforce_plus_plus_baseline,
    remax,
    rloo,
    whiten,
)
from tests.parity.conftest import PARITY_TOLERANCE

DTYPE = torch.float64
LENGTH = 9
SEEDS = range(3)
# Group sizes of a batch; the ids are shuffled across the batch.
LAYOUTS = [(4, 4, 4, 4), (2, 2, 2, 2, 2), (1, 3, 5, 2, 8), (8, 1, 1, 6)]
LAYOUTS_WITHOUT_SINGLETONS = [(4, 4, 4, 4), (2, 2, 2, 2, 2), (3, 5, 2, 8), (16,)]
HOLE_RATE = 0.3


def _batch(
    seed: int, sizes: tuple[int, ...], *, holes: bool = False, dense: bool = False, discrete: bool = False
) -> AdvantageInputs:
    """Random batch: ragged lengths (>= 1 token), optional observation holes, outcome or dense rewards."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.cat([torch.full((size,), 10 * g + 1, dtype=torch.int64) for g, size in enumerate(sizes)])
    ids = ids[torch.randperm(ids.numel(), generator=gen)]
    size = ids.numel()
    lengths = torch.randint(1, LENGTH + 1, (size,), generator=gen)
    mask = torch.arange(LENGTH) < lengths.unsqueeze(-1)
    if holes:
        mask &= torch.rand(size, LENGTH, generator=gen) > HOLE_RATE
        mask[:, 0] = True
    if dense:
        rewards = torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    else:
        outcome = (
            torch.randint(0, 2, (size,), generator=gen).to(DTYPE)
            if discrete
            else torch.randn(size, generator=gen, dtype=DTYPE)
        )
        last = (mask * torch.arange(LENGTH)).argmax(dim=-1)
        rewards = torch.zeros(size, LENGTH, dtype=DTYPE)
        rewards[torch.arange(size), last] = outcome
    rewards = torch.where(mask, rewards, torch.zeros((), dtype=DTYPE))
    return AdvantageInputs(
        token_level_rewards=rewards,
        response_mask=mask.to(DTYPE),
        group_ids=ids,
        values=torch.randn(size, LENGTH, generator=gen, dtype=DTYPE),
        baseline_rewards=torch.randn(size, generator=gen, dtype=DTYPE),
    )


def _verl_args(inputs: AdvantageInputs) -> dict[str, object]:
    """verl's common keyword arguments: fresh copies (verl edits some in place) and a numpy `index`."""
    return {
        "token_level_rewards": inputs.token_level_rewards.clone(),
        "response_mask": inputs.response_mask.clone(),
        "index": inputs.group_ids.numpy(),
    }


def _close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs.to(ours.dtype), atol=PARITY_TOLERANCE, rtol=PARITY_TOLERANCE)


def _close_on_mask(ours: torch.Tensor, theirs: torch.Tensor, inputs: AdvantageInputs) -> None:
    _close(ours[inputs.mask], theirs[inputs.mask])
    assert bool((ours[~inputs.mask] == 0).all())


seeds = pytest.mark.parametrize("seed", SEEDS)
layouts = pytest.mark.parametrize("sizes", LAYOUTS)


@seeds
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.99, 0.95), (0.5, 0.0)])
def test_gae(core_algos: ModuleType, seed: int, holes: bool, gamma: float, lam: float) -> None:
    inputs = _batch(seed, (4, 4), holes=holes, dense=True)
    theirs_adv, theirs_ret = core_algos.compute_gae_advantage_return(
        token_level_rewards=inputs.token_level_rewards.clone(),
        values=inputs.values.clone(),
        response_mask=inputs.response_mask.clone(),
        gamma=gamma,
        lam=lam,
    )
    ours = gae(inputs, gamma=gamma, lam=lam)
    _close_on_mask(whiten(ours.advantages, inputs.response_mask), theirs_adv, inputs)
    _close_on_mask(ours.returns, theirs_ret, inputs)


@seeds
@layouts
@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("discrete", [False, True])
def test_grpo(core_algos: ModuleType, seed: int, sizes: tuple[int, ...], norm_by_std: bool, discrete: bool) -> None:
    inputs = _batch(seed, sizes, discrete=discrete)
    theirs, theirs_ret = core_algos.compute_grpo_outcome_advantage(
        **_verl_args(inputs), epsilon=1e-6, norm_adv_by_std_in_grpo=norm_by_std
    )
    ours = grpo(inputs, norm_by_std=norm_by_std, epsilon=1e-6)
    _close(ours.advantages, theirs)
    _close(ours.returns, theirs_ret)


@seeds
@layouts
def test_rloo(core_algos: ModuleType, seed: int, sizes: tuple[int, ...]) -> None:
    inputs = _batch(seed, sizes)
    theirs, _ = core_algos.compute_rloo_outcome_advantage(**_verl_args(inputs))
    _close(rloo(inputs).advantages, theirs)


@seeds
@pytest.mark.parametrize("sizes", LAYOUTS_WITHOUT_SINGLETONS)
def test_rloo_vectorized(core_algos: ModuleType, seed: int, sizes: tuple[int, ...]) -> None:
    inputs = _batch(seed, sizes)
    theirs, _ = core_algos.compute_rloo_vectorized_outcome_advantage(**_verl_args(inputs))
    _close(rloo(inputs).advantages, theirs)


def test_rloo_singletons_follow_verl_rloo_not_rloo_vectorized(core_algos: ModuleType) -> None:
    inputs = _batch(0, (1, 3, 1))
    singleton = (inputs.group_ids.unsqueeze(0) == inputs.group_ids.unsqueeze(1)).sum(dim=0) == 1
    loop, _ = core_algos.compute_rloo_outcome_advantage(**_verl_args(inputs))
    vectorized, _ = core_algos.compute_rloo_vectorized_outcome_advantage(**_verl_args(inputs))
    ours = rloo(inputs).advantages
    _close(ours, loop)
    _close(ours[~singleton], vectorized[~singleton])
    # verl's vectorised RLOO drops a singleton's reward; its loop version (and ours) keeps it with baseline 0.
    assert bool((vectorized[singleton] == 0).all())
    _close(ours[singleton], inputs.token_level_rewards[singleton].sum(dim=-1, keepdim=True) * inputs.mask[singleton])


@seeds
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_reinforce_plus_plus(core_algos: ModuleType, seed: int, holes: bool, gamma: float) -> None:
    inputs = _batch(seed, (3, 3, 2), holes=holes, dense=True)
    theirs_adv, theirs_ret = core_algos.compute_reinforce_plus_plus_outcome_advantage(
        token_level_rewards=inputs.token_level_rewards.clone(),
        response_mask=inputs.response_mask.clone(),
        config=SimpleNamespace(gamma=gamma),
    )
    ours = reinforce_plus_plus(inputs, gamma=gamma)
    _close(ours.advantages, theirs_adv)
    _close(ours.returns, theirs_ret)


@seeds
@layouts
def test_reinforce_plus_plus_baseline(core_algos: ModuleType, seed: int, sizes: tuple[int, ...]) -> None:
    inputs = _batch(seed, sizes)
    theirs, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(**_verl_args(inputs))
    _close(reinforce_plus_plus_baseline(inputs).advantages, theirs)


@seeds
@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("dense", [False, True])
def test_remax(core_algos: ModuleType, seed: int, holes: bool, dense: bool) -> None:
    inputs = _batch(seed, (2, 2, 2), holes=holes, dense=dense)
    theirs_adv, theirs_ret = core_algos.compute_remax_outcome_advantage(
        token_level_rewards=inputs.token_level_rewards.clone(),
        reward_baselines=inputs.baseline_rewards.clone(),
        response_mask=inputs.response_mask.clone(),
    )
    ours = remax(inputs)
    _close_on_mask(ours.advantages, theirs_adv, inputs)
    _close_on_mask(ours.returns, theirs_ret, inputs)


@seeds
@layouts
def test_opo(core_algos: ModuleType, seed: int, sizes: tuple[int, ...]) -> None:
    inputs = _batch(seed, sizes)
    theirs, _ = core_algos.compute_opo_outcome_advantage(**_verl_args(inputs))
    _close(opo(inputs).advantages, theirs)


@seeds
@layouts
@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("f_norm", [1.0, 2.5])
def test_gpg(core_algos: ModuleType, seed: int, sizes: tuple[int, ...], discrete: bool, f_norm: float) -> None:
    inputs = _batch(seed, sizes, discrete=discrete)
    theirs, _ = core_algos.compute_gpg_outcome_advantage(**_verl_args(inputs), f_norm=f_norm)
    _close(gpg(inputs, f_norm=f_norm).advantages, theirs)


@seeds
@pytest.mark.parametrize("sizes", LAYOUTS_WITHOUT_SINGLETONS)
@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("discrete", [False, True])
def test_grpo_passk(
    core_algos: ModuleType, seed: int, sizes: tuple[int, ...], norm_by_std: bool, discrete: bool
) -> None:
    inputs = _batch(seed, sizes, discrete=discrete)
    theirs, _ = core_algos.compute_grpo_passk_outcome_advantage(
        **_verl_args(inputs), epsilon=1e-6, config={"norm_adv_by_std_in_grpo": norm_by_std}
    )
    _close(grpo_passk(inputs, norm_by_std=norm_by_std, epsilon=1e-6).advantages, theirs)


def test_grpo_passk_rejects_singletons_like_verl(core_algos: ModuleType) -> None:
    inputs = _batch(0, (1, 3))
    with pytest.raises(ValueError, match="Pass@k requires at least 2 samples per group"):
        core_algos.compute_grpo_passk_outcome_advantage(**_verl_args(inputs), config={})
    with pytest.raises(ValueError, match="grpo_passk needs at least 2 samples per group"):
        grpo_passk(inputs)


def test_we_ignore_rewards_under_the_mask_where_verl_does_not(core_algos: ModuleType) -> None:
    clean = _batch(0, (4, 4))
    planted = torch.where(clean.mask, clean.token_level_rewards, torch.full((), 5.0, dtype=DTYPE))
    poisoned = AdvantageInputs(planted, clean.response_mask, clean.group_ids)
    verl_clean, _ = core_algos.compute_grpo_outcome_advantage(**_verl_args(clean))
    verl_poisoned, _ = core_algos.compute_grpo_outcome_advantage(**_verl_args(poisoned))
    # verl counts the padding reward into the outcome score; we match verl on the clean batch either way.
    assert not torch.allclose(verl_poisoned, verl_clean)
    _close(grpo(poisoned).advantages, verl_clean)
