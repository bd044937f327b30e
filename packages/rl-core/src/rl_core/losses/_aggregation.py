"""Reducing a per-token loss `(B, T)` to a scalar, normalised so micro-batches and ranks sum exactly.

Every mode divides by a normaliser computed over the *global* batch (all micro-batches on all
data-parallel ranks of one optimizer step). Summing the aggregated losses of the parts then equals
the aggregated loss of the whole, so gradient accumulation and data parallelism change nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rl_core._registry import lookup, registrar
from rl_core._validation import as_bool_mask, check_tensor
from rl_core.schema import RESPONSE_MASK

Aggregator = Callable[[torch.Tensor, torch.Tensor, "LossNormalizer"], torch.Tensor]

AGGREGATIONS: dict[str, Aggregator] = {}
"""Loss aggregation modes by name."""

register_aggregation = registrar(AGGREGATIONS, "loss aggregation mode")


@dataclass(frozen=True)
class LossNormalizer:
    """Global counts that turn summed per-token losses into the full-batch loss.

    Attributes:
        num_tokens: response tokens (mask ones) in the global batch.
        num_sequences: sequences with at least one response token in the global batch.
        horizon: the fixed generation budget (max response length) that
            `seq-mean-token-sum-norm` divides by (Dr. GRPO's constant); it must not depend on how a
            micro-batch happens to be padded.
    """

    num_tokens: float
    num_sequences: float
    horizon: float

    def __post_init__(self) -> None:
        for field in ("num_tokens", "num_sequences", "horizon"):
            value = getattr(self, field)
            if not value > 0:
                raise ValueError(f"LossNormalizer.{field} must be > 0, got {value}")

    @classmethod
    def from_mask(cls, response_mask: torch.Tensor, *, horizon: float | None = None) -> LossNormalizer:
        """Counts of one local batch: use it when the batch is the whole optimizer step.

        Args:
            response_mask: `(B, T)` 0/1 or bool mask of response tokens.
            horizon: max response length; defaults to `T`.
        """
        check_tensor(RESPONSE_MASK, response_mask, ("B", "T"))
        mask = as_bool_mask(RESPONSE_MASK, response_mask)
        num_tokens = float(mask.sum())
        num_sequences = float(mask.any(dim=-1).sum())
        if num_tokens == 0:
            raise ValueError("response_mask has no response tokens; nothing to normalise by")
        return cls(num_tokens, num_sequences, float(horizon if horizon is not None else mask.shape[-1]))

    def __add__(self, other: LossNormalizer) -> LossNormalizer:
        """Counts of two disjoint parts of a batch combined (the horizon must agree)."""
        if self.horizon != other.horizon:
            raise ValueError(f"cannot combine normalisers with horizons {self.horizon} and {other.horizon}")
        return LossNormalizer(
            self.num_tokens + other.num_tokens, self.num_sequences + other.num_sequences, self.horizon
        )


@register_aggregation("token-mean")
def token_mean(loss: torch.Tensor, mask: torch.Tensor, norm: LossNormalizer) -> torch.Tensor:
    """Sum of masked token losses over the global token count (DAPO's token-level mean)."""
    return (loss * mask).sum() / norm.num_tokens


@register_aggregation("seq-mean-token-sum")
def seq_mean_token_sum(loss: torch.Tensor, mask: torch.Tensor, norm: LossNormalizer) -> torch.Tensor:
    """Per-sequence token sums, averaged over the global sequence count."""
    return (loss * mask).sum() / norm.num_sequences


@register_aggregation("seq-mean-token-mean")
def seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, norm: LossNormalizer) -> torch.Tensor:
    """Per-sequence token means, averaged over the global sequence count (original GRPO)."""
    tokens_per_seq = mask.sum(dim=-1)
    seq_means = (loss * mask).sum(dim=-1) / tokens_per_seq.clamp(min=1)
    return seq_means.sum() / norm.num_sequences


@register_aggregation("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(loss: torch.Tensor, mask: torch.Tensor, norm: LossNormalizer) -> torch.Tensor:
    """Per-sequence token sums over a constant horizon, averaged over sequences (Dr. GRPO)."""
    return (loss * mask).sum() / (norm.num_sequences * norm.horizon)


AGGREGATION_DIVISORS: dict[str, Callable[[LossNormalizer], float]] = {
    "token-mean": lambda norm: norm.num_tokens,
    "seq-mean-token-sum": lambda norm: norm.num_sequences,
    "seq-mean-token-mean": lambda norm: norm.num_sequences,
    "seq-mean-token-sum-norm": lambda norm: norm.num_sequences * norm.horizon,
}
"""For each built-in mode, the one product of the normaliser's counts its loss divides by: the mode's loss (and so
its gradient) is linear in 1 / divisor and reads nothing else of the normaliser. A loss computed under one
normaliser therefore equals, times `divisor(provisional) / divisor(global)`, the loss under another; a data-parallel
engine may so learn the global counts after the backward. Modes registered elsewhere are not listed (unknown)."""


def aggregation_divisor(mode: str, normalizer: LossNormalizer) -> float | None:
    """What the aggregation `mode` divides its summed loss by under `normalizer`, or None when the mode is not
    known to be linear in one such divisor (see `AGGREGATION_DIVISORS`)."""
    divisor = AGGREGATION_DIVISORS.get(mode)
    return None if divisor is None else float(divisor(normalizer))


def rescaled_normalizer(
    mode: str, provisional: LossNormalizer, num_tokens: float, num_sequences: float, horizon: float
) -> tuple[LossNormalizer, float]:
    """The step's global normaliser from its counts, and the factor `divisor(provisional) / divisor(global)` that turns
    a loss aggregated with `mode` under `provisional` (and so its gradient) into the loss under the global normaliser.

    Args:
        mode: one of `AGGREGATION_DIVISORS` (a mode known to be linear in 1 / divisor).
        provisional: the normaliser the loss was computed under.
        num_tokens: the step's global count of response tokens (see `LossNormalizer`).
        num_sequences: the step's global count of sequences with a response token.
        horizon: the step's fixed generation budget (see `LossNormalizer`).

    Raises:
        ValueError: `mode` is not in `AGGREGATION_DIVISORS`, or a count is not > 0.
    """
    divisor = AGGREGATION_DIVISORS.get(mode)
    if divisor is None:
        raise ValueError(
            f"aggregation mode {mode!r} is not known to divide by one product of the normaliser's counts (known: "
            f"{sorted(AGGREGATION_DIVISORS)}); compute the step's normaliser before the backward instead"
        )
    normalizer = LossNormalizer(num_tokens, num_sequences, horizon)
    return normalizer, float(divisor(provisional)) / float(divisor(normalizer))


def aggregate_loss(
    loss: torch.Tensor,
    response_mask: torch.Tensor,
    mode: str = "token-mean",
    normalizer: LossNormalizer | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar with the named aggregation mode.

    Args:
        loss: `(B, T)` per-token loss; values under a zero mask never affect the result, NaN included.
        response_mask: `(B, T)` 0/1 or bool mask of tokens that count.
        mode: one of `AGGREGATIONS` ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
            "seq-mean-token-sum-norm").
        normalizer: global counts; `None` means this batch is the whole step
            (`LossNormalizer.from_mask(response_mask)`).

    Returns:
        A 0-dim tensor.
    """
    dims: dict[str, int] = {}
    check_tensor("loss", loss, ("B", "T"), dims=dims, floating=True)
    check_tensor(RESPONSE_MASK, response_mask, ("B", "T"), dims=dims)
    aggregator = lookup(AGGREGATIONS, mode, "loss aggregation mode")
    mask = as_bool_mask(RESPONSE_MASK, response_mask)
    norm = normalizer if normalizer is not None else LossNormalizer.from_mask(mask)
    # torch.where, not multiplication: a NaN/inf under a zero mask must not leak into the sum.
    safe_loss = torch.where(mask, loss, torch.zeros((), dtype=loss.dtype, device=loss.device))
    return aggregator(safe_loss, mask.to(loss.dtype), norm)


def get_aggregation(name: str) -> Aggregator:
    """Return the aggregation registered under `name`; unknown names list the valid ones."""
    return lookup(AGGREGATIONS, name, "loss aggregation mode")
