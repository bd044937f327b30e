"""Per-token estimators of KL(π‖π_ref) from sampled tokens (Schulman, http://joschu.net/blog/kl-approx.html).

Notation in the docstrings: tokens `a ~ π` were sampled from the policy, `δ = log π(a) - log π_ref(a)`
(`log_probs - ref_log_probs`) and `r = π_ref(a) / π(a) = exp(-δ)`. "Gradient" means the derivative of
the per-token value with respect to `log_probs`, the only term that reaches the policy when the estimate
is used as a loss; its expectation under π tells which divergence that loss actually minimises.

The `+` forms (`k1+`, `abs+`, `k2+`, `k3+`) keep the named estimator's value but carry k2's gradient, whose
expectation `E_π[δ ∇log π]` is exactly `∇ KL(π‖π_ref)`: the straight-through trick of verl's `kl_penalty`.
"""

from __future__ import annotations

import torch

from rl_core._validation import check_same_device, check_tensor
from rl_core.kl._registry import register_kl_estimator
from rl_core.schema import REF_LOG_PROBS

_K3_MAX_LOG_RATIO = 20.0
"""|log r| is clamped here before exp, as in verl, so the ratio stays finite (exp(20) ≈ 4.9e8)."""

_K3_MAX_VALUE = 10.0
"""verl's cap on one token's k3 estimate, so a token the reference finds far likelier cannot swamp the batch."""


def _check_pair(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> None:
    dims: dict[str, int] = {}
    check_tensor("log_probs", log_probs, ("B", "T"), dims=dims, floating=True)
    check_tensor(REF_LOG_PROBS, ref_log_probs, ("B", "T"), dims=dims, floating=True)
    check_same_device(log_probs=log_probs, ref_log_probs=ref_log_probs)


def _with_k2_gradient(value: torch.Tensor, log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    # `surrogate - surrogate.detach()` is exactly zero but carries k2's gradient; adding the detached value
    # gives the estimator's forward value with k2's backward (same expression and order as verl).
    surrogate = 0.5 * (log_probs - ref_log_probs).square()
    return surrogate - surrogate.detach() + value.detach()


@register_kl_estimator("k1")
@register_kl_estimator("kl")
def k1(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """The log-ratio `δ = log π - log π_ref` per token.

    Bias: none, `E_π[δ] = KL(π‖π_ref)`; but a single token's estimate can be negative and its variance is high.
    Gradient: 1, whose expectation `E_π[∇log π]` is 0, so as a loss k1 does not pull π towards π_ref; it is
    meant for the reward, where the policy gradient supplies the score-function term.

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate.
    """
    _check_pair(log_probs, ref_log_probs)
    return log_probs - ref_log_probs


@register_kl_estimator("abs")
def abs_kl(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """The absolute log-ratio `|δ|` per token.

    Bias: upward, `E_π|δ| >= |E_π δ| = KL(π‖π_ref)`; never negative.
    Gradient: `sign(δ)`, whose expectation is not the gradient of any KL; use `abs+` for that.

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate.
    """
    _check_pair(log_probs, ref_log_probs)
    return (log_probs - ref_log_probs).abs()


@register_kl_estimator("k2")
@register_kl_estimator("mse")
def k2(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Half the squared log-ratio `δ² / 2` per token.

    Bias: never negative; `E_π[δ²/2]` matches KL(π‖π_ref) to second order in δ, so the bias is small only
    while π stays close to π_ref.
    Gradient: `δ`, and `E_π[δ ∇log π] = ∇ KL(π‖π_ref)` exactly: the unbiased KL gradient.

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate.
    """
    _check_pair(log_probs, ref_log_probs)
    return 0.5 * (log_probs - ref_log_probs).square()


@register_kl_estimator("k3")
@register_kl_estimator("low_var_kl")
def k3(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Schulman's low-variance estimator `r - 1 - log r` per token, capped at 10 as in verl.

    Bias: none before the caps, `E_π[r - 1 - log r] = KL(π‖π_ref)` because `E_π[r] = 1`; never negative, and of
    lower variance than k1 while π is close to π_ref. Tokens where a cap binds (`|log r| > 20`, or an estimate
    above 10, i.e. `log r` above 2.6 or below -11) are biased low.
    Gradient: `1 - r`, with expectation `-E_{π_ref}[∇log π] = ∇ KL(π_ref‖π)`: as a loss k3 minimises the
    reverse KL, not KL(π‖π_ref). The gradient is 0 where a cap binds. Use `k3+` for the forward-KL gradient.

    `expm1(log r) - log r` replaces verl's `exp(log r) - log r - 1`: the same value, but without the cancellation
    that makes verl's form inaccurate (even negative) when π ≈ π_ref.

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate in `[0, 10]`.
    """
    _check_pair(log_probs, ref_log_probs)
    log_ratio = (ref_log_probs - log_probs).clamp(-_K3_MAX_LOG_RATIO, _K3_MAX_LOG_RATIO)
    return (torch.expm1(log_ratio) - log_ratio).clamp(max=_K3_MAX_VALUE)


@register_kl_estimator("k1+")
@register_kl_estimator("kl+")
def k1_plus(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k1's value (`δ`, unbiased for KL(π‖π_ref)) with k2's gradient (`δ`, the unbiased KL gradient).

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate.
    """
    return _with_k2_gradient(k1(log_probs, ref_log_probs), log_probs, ref_log_probs)


@register_kl_estimator("abs+")
def abs_plus(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """abs's value (`|δ|`, biased upward) with k2's gradient (`δ`, the unbiased KL gradient).

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate.
    """
    return _with_k2_gradient(abs_kl(log_probs, ref_log_probs), log_probs, ref_log_probs)


@register_kl_estimator("k2+")
@register_kl_estimator("mse+")
def k2_plus(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k2 itself (value `δ²/2`, gradient `δ`); registered so every estimator name has a `+` form, as in verl.

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate.
    """
    return _with_k2_gradient(k2(log_probs, ref_log_probs), log_probs, ref_log_probs)


@register_kl_estimator("k3+")
@register_kl_estimator("low_var_kl+")
def k3_plus(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k3's value (`r - 1 - log r` capped at 10, unbiased below the caps) with k2's gradient (`δ`, everywhere).

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.

    Returns:
        `(B, T)` per-token estimate.
    """
    return _with_k2_gradient(k3(log_probs, ref_log_probs), log_probs, ref_log_probs)
