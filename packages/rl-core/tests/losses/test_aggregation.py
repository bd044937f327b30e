"""The four aggregation modes by hand, the global normaliser's micro-batch/rank additivity, and masked junk."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError, UnknownNameError
from rl_core.losses import (
    AGGREGATION_DIVISORS,
    AGGREGATIONS,
    LossNormalizer,
    aggregate_loss,
    aggregation_divisor,
    get_aggregation,
    rescaled_normalizer,
)

from ._batches import DTYPE, tensor

LOSS = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
# Row 0 keeps tokens 0 and 1, row 1 token 0 only, row 2 nothing: 3 tokens, 2 sequences, horizon 3.
MASK = [[1, 1, 0], [1, 0, 0], [0, 0, 0]]

HAND = {
    "token-mean": (1 + 2 + 4) / 3,
    "seq-mean-token-sum": ((1 + 2) + 4) / 2,
    "seq-mean-token-mean": ((1 + 2) / 2 + 4 / 1) / 2,
    "seq-mean-token-sum-norm": ((1 + 2) + 4) / (2 * 3),
}


@pytest.mark.parametrize(("mode", "expected"), sorted(HAND.items()))
def test_modes_by_hand(mode: str, expected: float) -> None:
    assert aggregate_loss(tensor(LOSS), torch.tensor(MASK), mode).item() == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 7 / 10),
        ("seq-mean-token-sum", 7 / 4),
        ("seq-mean-token-mean", (1.5 + 4) / 4),
        ("seq-mean-token-sum-norm", 7 / (4 * 8)),
    ],
)
def test_modes_divide_by_the_global_normaliser(mode: str, expected: float) -> None:
    norm = LossNormalizer(num_tokens=10, num_sequences=4, horizon=8)
    assert aggregate_loss(tensor(LOSS), torch.tensor(MASK), mode, norm).item() == pytest.approx(expected, abs=1e-15)


def test_registry_holds_exactly_the_four_modes() -> None:
    assert sorted(AGGREGATIONS) == sorted(HAND)
    assert get_aggregation("token-mean") is AGGREGATIONS["token-mean"]


def test_normalizer_from_mask_counts_tokens_nonempty_sequences_and_horizon() -> None:
    assert LossNormalizer.from_mask(torch.tensor(MASK)) == LossNormalizer(3.0, 2.0, 3.0)
    assert LossNormalizer.from_mask(torch.tensor(MASK), horizon=16) == LossNormalizer(3.0, 2.0, 16.0)


def test_normalizers_of_parts_add_up_to_the_whole() -> None:
    mask = torch.tensor(MASK)
    assert LossNormalizer.from_mask(mask[:1]) + LossNormalizer.from_mask(mask[1:]) == LossNormalizer.from_mask(mask)


def test_rejections() -> None:
    with pytest.raises(ValueError, match=r"LossNormalizer.num_tokens must be > 0, got 0"):
        LossNormalizer(0, 1, 1)
    with pytest.raises(ValueError, match=r"LossNormalizer.horizon must be > 0, got nan"):
        LossNormalizer(1, 1, float("nan"))
    with pytest.raises(ValueError, match="response_mask has no response tokens; nothing to normalise by"):
        LossNormalizer.from_mask(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"cannot combine normalisers with horizons 3.0 and 4.0"):
        LossNormalizer(1.0, 1.0, 3.0) + LossNormalizer(1.0, 1.0, 4.0)
    with pytest.raises(UnknownNameError, match=r"unknown loss aggregation mode 'token_mean' \(did you mean "):
        aggregate_loss(tensor(LOSS), torch.tensor(MASK), "token_mean")
    with pytest.raises(UnknownNameError, match="valid names: seq-mean-token-mean, seq-mean-token-sum, "):
        get_aggregation("mean")
    with pytest.raises(ShapeError, match=r"response_mask must have shape \(B, T\) with B=3"):
        aggregate_loss(tensor(LOSS), torch.ones(2, 3))
    with pytest.raises(ShapeError, match="loss must have a floating dtype"):
        aggregate_loss(torch.ones(3, 3, dtype=torch.int64), torch.tensor(MASK))
    with pytest.raises(ShapeError, match=r"response_mask must hold only 0/1 \(or bool\) values"):
        aggregate_loss(tensor(LOSS), torch.full((3, 3), 0.5))


@st.composite
def _split_batches(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """A (B, T) loss and ragged mask with >= 1 token, and cut points splitting the rows into parts."""
    size, length = draw(st.integers(2, 8)), draw(st.integers(1, 6))
    value = st.floats(-10.0, 10.0, allow_nan=False, allow_subnormal=False)
    loss = [[draw(value) for _ in range(length)] for _ in range(size)]
    mask = [[draw(st.integers(0, 1)) for _ in range(length)] for _ in range(size)]
    mask[draw(st.integers(0, size - 1))][0] = 1
    cuts = sorted(draw(st.sets(st.integers(1, size - 1), max_size=size - 1)))
    return tensor(loss), torch.tensor(mask), cuts


@pytest.mark.parametrize("mode", sorted(HAND))
@settings(max_examples=60, deadline=None)
@given(data=_split_batches(), horizon=st.integers(6, 12))
def test_micro_batches_on_two_ranks_sum_to_the_full_batch(
    mode: str, data: tuple[torch.Tensor, torch.Tensor, list[int]], horizon: int
) -> None:
    loss, mask, cuts = data
    norm = LossNormalizer.from_mask(mask, horizon=horizon)
    full = aggregate_loss(loss, mask, mode, norm)
    # Micro-batches are contiguous row blocks; the even ones go to rank 0 and the odd ones to rank 1.
    bounds = [0, *cuts, loss.shape[0]]
    parts = [(loss[a:b], mask[a:b]) for a, b in itertools.pairwise(bounds)]
    ranks = [0.0, 0.0]
    for index, (part_loss, part_mask) in enumerate(parts):
        ranks[index % 2] += aggregate_loss(part_loss, part_mask, mode, norm).item()
    # Data parallelism sums the ranks' gradients of these losses (an all-reduce of the sum).
    assert sum(ranks) == pytest.approx(full.item(), rel=1e-12, abs=1e-12)


_JUNK = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300])


@pytest.mark.parametrize("mode", sorted(HAND))
@settings(max_examples=30, deadline=None)
@given(data=_split_batches(), junk=_JUNK)
def test_junk_under_a_zero_mask_never_leaks(
    mode: str, data: tuple[torch.Tensor, torch.Tensor, list[int]], junk: float
) -> None:
    loss, mask, _ = data
    clean = aggregate_loss(loss, mask, mode)
    poisoned = loss.masked_fill(mask == 0, junk).requires_grad_(True)
    result = aggregate_loss(poisoned, mask, mode)
    assert torch.equal(result.detach(), clean)
    result.backward()
    assert poisoned.grad is not None
    assert bool(poisoned.grad.isfinite().all())
    assert bool((poisoned.grad[mask == 0] == 0).all())


def test_bool_int_and_float_masks_agree() -> None:
    loss = tensor(LOSS)
    results = {
        aggregate_loss(loss, torch.tensor(MASK, dtype=dtype), "seq-mean-token-mean").item()
        for dtype in (torch.bool, torch.int32, DTYPE)
    }
    assert len(results) == 1


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
def test_every_mode_is_linear_in_one_over_its_divisor(mode: str) -> None:
    """What lets a ddp engine run the backward under a provisional normaliser and rescale afterwards."""
    assert AGGREGATION_DIVISORS.keys() == AGGREGATIONS.keys()
    gen = torch.Generator().manual_seed(0)
    loss = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    mask = (torch.rand(3, 5, generator=gen) > 0.3).long()
    provisional, final = LossNormalizer(1.0, 1.0, 1.0), LossNormalizer(37.0, 11.0, 9.0)
    scale = aggregation_divisor(mode, provisional) / aggregation_divisor(mode, final)
    rescaled = aggregate_loss(loss, mask, mode, provisional) * scale
    torch.testing.assert_close(rescaled, aggregate_loss(loss, mask, mode, final), rtol=1e-12, atol=0)
    assert aggregation_divisor("not-a-mode", final) is None
    # What a loss's `rescale` returns: the global normaliser of the counts and the same factor.
    assert rescaled_normalizer(mode, provisional, 37.0, 11.0, 9.0) == (final, scale)
    with pytest.raises(ValueError, match="'not-a-mode' is not known to divide by one product"):
        rescaled_normalizer("not-a-mode", provisional, 37.0, 11.0, 9.0)
