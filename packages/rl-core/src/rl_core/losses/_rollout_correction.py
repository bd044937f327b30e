"""Importance-sampling correction for the mismatch between the inference engine and the trainer.

The engine that generated a batch (vLLM, SGLang, often in bf16) and the trainer that recomputes
`old_log_probs` assign slightly different probabilities to the same tokens. The ratio
`w = pi_train / pi_rollout = exp(old_log_probs - rollout_log_probs)` reweights the loss to the trainer's
distribution. Two ways of keeping it bounded, as in verl's `rollout_corr_helper`:

- truncated IS ("tis"): `min(w, upper)` (Yao et al. 2025, "Your efficient RL framework secretly brings
  you off-policy RL training");
- masked IS ("mis"): tokens (or whole sequences) with `w` outside `[lower, upper]` are dropped from the
  loss, as if they were padding; the others keep weight `w` (verl's IcePop weights with its rejection mask).

At "token" level `w` is per token; at "sequence" level it is `exp(sum of the sequence's token
log-ratios)`, broadcast to its tokens. Log-ratios are clamped to +-20 before `exp`, as verl does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import torch

from rl_core._validation import as_bool_mask, check_same_device, check_tensor
from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import LOG_RATIO_BOUND, masked_mean
from rl_core.losses._registry import get_policy_loss
from rl_core.losses._types import PolicyLoss, PolicyLossInputs, PolicyLossOutput
from rl_core.schema import OLD_LOG_PROBS, RESPONSE_MASK, ROLLOUT_LOG_PROBS

TRUNCATED = "tis"
MASKED = "mis"
MODES = (TRUNCATED, MASKED)
"""Correction modes: truncated or masked importance sampling."""

LEVELS = ("token", "sequence")
"""Granularity of the importance ratio."""

DEFAULT_UPPER = 2.0
"""verl's default `rollout_is_threshold`."""


class RolloutCorrection(NamedTuple):
    """The correction of one batch.

    Attributes:
        weights: `(B, T)` detached importance weights, 0 wherever `response_mask` is 0.
        response_mask: `(B, T)` mask of the tokens that stay in the loss, in the input mask's dtype:
            the input mask for "tis", the input mask less the rejected tokens for "mis".
        metrics: detached 0-dim tensors: `rollout_is_mean` (mean weight over the input mask's tokens),
            `rollout_is_truncated_fraction` ("tis") or `rollout_is_masked_fraction` ("mis"): the fraction of
            the level's units (response tokens, or non-empty sequences) whose ratio was out of bounds, and verl's
            statistics of the unbounded ratios over those units: `rollout_is_std`, `_min`, `_max`,
            `_eff_sample_size` (`1 / mean((w / mean(w))^2)`), `_ratio_fraction_high` (above `upper`) and
            `_ratio_fraction_low` (below `lower`, or `1 / upper` when unset, as verl reports it for "tis" too).
    """

    weights: torch.Tensor
    response_mask: torch.Tensor
    metrics: dict[str, torch.Tensor]


def _check_settings(mode: str, level: str, upper: float, lower: float | None) -> float:
    """Validate the correction's settings; return the lower bound that "mis" uses."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if not upper > 0:
        raise ValueError(f"upper must be > 0, got {upper}")
    if mode == TRUNCATED:
        if lower is not None:
            raise ValueError("lower applies to mode='mis' only; truncated IS clamps weights above at upper")
        return 0.0
    if lower is None:
        return 1.0 / upper
    if not 0 < lower <= upper:
        raise ValueError(f"lower must be in (0, upper={upper}], got {lower}")
    return lower


@torch.no_grad()
def rollout_correction(
    old_log_probs: torch.Tensor,
    rollout_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    mode: str = TRUNCATED,
    level: str = "token",
    upper: float = DEFAULT_UPPER,
    lower: float | None = None,
) -> RolloutCorrection:
    """Importance weights `pi_train / pi_rollout` bounded by truncation or masking (see the module docstring).

    Args:
        old_log_probs: `(B, T)` float log-probabilities recomputed by the trainer.
        rollout_log_probs: `(B, T)` float log-probabilities reported by the inference engine.
        response_mask: `(B, T)` 0/1 or bool mask of response tokens; nothing under a zero mask is read.
        mode: "tis" (truncate weights above at `upper`) or "mis" (mask out ratios outside `[lower, upper]`).
        level: "token" or "sequence".
        upper: > 0, the truncation threshold or the upper bound of the kept ratios.
        lower: "mis" only, in (0, upper]; defaults to `1 / upper`.

    Returns:
        The weights, the (possibly reduced) mask and the metrics.
    """
    lower_bound = _check_settings(mode, level, upper, lower)
    dims: dict[str, int] = {}
    check_tensor(OLD_LOG_PROBS, old_log_probs, ("B", "T"), dims=dims, floating=True)
    check_tensor(ROLLOUT_LOG_PROBS, rollout_log_probs, ("B", "T"), dims=dims, floating=True)
    check_tensor(RESPONSE_MASK, response_mask, ("B", "T"), dims=dims)
    check_same_device(old_log_probs=old_log_probs, rollout_log_probs=rollout_log_probs, response_mask=response_mask)
    mask = as_bool_mask(RESPONSE_MASK, response_mask)
    zero = old_log_probs.new_zeros(())
    log_ratio = torch.where(mask, old_log_probs - rollout_log_probs, zero)
    if level == "sequence":
        log_ratio = log_ratio.sum(dim=-1, keepdim=True).expand_as(log_ratio)
    raw = torch.where(mask, torch.exp(log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)), zero)
    if mode == TRUNCATED:
        out_of_bounds = mask & (raw > upper)
        weights, kept = raw.clamp(max=upper), mask
    else:
        out_of_bounds = mask & ((raw < lower_bound) | (raw > upper))
        kept = mask & ~out_of_bounds
        weights = torch.where(kept, raw, zero)
    # The level's units: response tokens, or non-empty sequences (each sequence's tokens share one ratio).
    if level == "token":
        units, unit_raw, unit_out = mask, raw, out_of_bounds
    else:
        units, unit_raw, unit_out = mask.any(dim=-1), raw.amax(dim=-1), out_of_bounds.any(dim=-1)
    metrics = {
        "rollout_is_mean": masked_mean(weights, mask),
        f"rollout_is_{'truncated' if mode == TRUNCATED else 'masked'}_fraction": masked_mean(
            unit_out.to(raw.dtype), units
        ),
        **weight_statistics(unit_raw, units, upper, 1.0 / upper if lower is None else lower),
    }
    return RolloutCorrection(weights, kept.to(response_mask.dtype), metrics)


def weight_statistics(raw: torch.Tensor, units: torch.Tensor, upper: float, lower: float) -> dict[str, torch.Tensor]:
    """verl's `rollout_corr/rollout_is_*` statistics of the unbounded (safety-clamped) weights over `units`.

    std, min and max of the weights, the fractions above `upper` and below `lower`, and the effective sample
    size `1 / mean((w / mean(w))^2)` as a fraction of the units (1: all weights equal).
    """
    values = raw[units]
    if values.numel() == 0:
        zero = raw.new_zeros(())
        return {name: zero for name in _STATISTICS}
    mean = values.mean()
    normalised = values / mean.clamp(min=torch.finfo(values.dtype).tiny)
    return {
        "rollout_is_std": values.std(correction=0),
        "rollout_is_min": values.min(),
        "rollout_is_max": values.max(),
        "rollout_is_eff_sample_size": 1.0 / normalised.square().mean(),
        "rollout_is_ratio_fraction_high": (values > upper).to(values.dtype).mean(),
        "rollout_is_ratio_fraction_low": (values < lower).to(values.dtype).mean(),
    }


_STATISTICS = (
    "rollout_is_std",
    "rollout_is_min",
    "rollout_is_max",
    "rollout_is_eff_sample_size",
    "rollout_is_ratio_fraction_high",
    "rollout_is_ratio_fraction_low",
)


def with_rollout_correction(
    loss: str | PolicyLoss,
    *,
    mode: str = TRUNCATED,
    level: str = "token",
    upper: float = DEFAULT_UPPER,
    lower: float | None = None,
) -> PolicyLoss:
    """Wrap a policy loss (a registered name or the function) so that it applies `rollout_correction` first.

    The returned loss has the wrapped one's signature. It reads `inputs.rollout_log_probs` (required) and
    `inputs.old_log_probs`, computes the correction with these settings, and runs the wrapped loss with
    `rollout_is_weights` set to the weights and `response_mask` to the corrected mask (rejected tokens
    count as padding everywhere, the normaliser included; with `normalizer=None` and every token rejected
    the loss is 0). Its metrics add the correction's to the wrapped loss's.

    Args:
        loss: a `POLICY_LOSSES` name or a policy-loss function.
        mode: "tis" or "mis" (see `rollout_correction`).
        level: "token" or "sequence".
        upper: > 0, the truncation threshold or the upper bound of the kept ratios.
        lower: "mis" only, in (0, upper]; defaults to `1 / upper`.
    """
    base = get_policy_loss(loss) if isinstance(loss, str) else loss
    _check_settings(mode, level, upper, lower)

    def corrected(
        inputs: PolicyLossInputs,
        /,
        *,
        aggregation: str = "token-mean",
        normalizer: LossNormalizer | None = None,
        **params: Any,
    ) -> PolicyLossOutput:
        if inputs.rollout_log_probs is None:
            raise ValueError("a rollout-corrected loss needs rollout_log_probs: build PolicyLossInputs with them")
        if inputs.rollout_is_weights is not None:
            raise ValueError("inputs already carry rollout_is_weights; correcting again would apply the weights twice")
        correction = rollout_correction(
            inputs.old_log_probs,
            inputs.rollout_log_probs,
            inputs.response_mask,
            mode=mode,
            level=level,
            upper=upper,
            lower=lower,
        )
        kept = dataclasses.replace(
            inputs, response_mask=correction.response_mask, rollout_is_weights=correction.weights
        )
        if normalizer is None and not bool(kept.mask.any()):
            # Nothing is left to normalise by; any positive count turns the all-masked sum into an exact 0.
            normalizer = LossNormalizer.from_mask(inputs.mask)
        out = base(kept, aggregation=aggregation, normalizer=normalizer, **params)
        return PolicyLossOutput(out.loss, {**out.metrics, **correction.metrics})

    name = getattr(base, "__name__", type(base).__name__)
    corrected.__name__ = corrected.__qualname__ = f"{name}_with_{mode}"
    corrected.__doc__ = (
        f"`{name}` with {mode.upper()} rollout correction at {level} level (upper={upper}, lower={lower})."
    )
    return corrected
