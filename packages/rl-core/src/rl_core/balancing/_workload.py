"""Per-sample compute cost estimated from token counts: plain token sum or attention-aware `a·L + L²`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rl_core import lookup, registrar
from rl_core.balancing._errors import BalancingError
from rl_core.balancing._partition import Number, check_token_counts

WorkloadFn = Callable[[list[int]], Sequence[Number]]

WORKLOADS: dict[str, WorkloadFn] = {}
"""Workload estimators by name; each maps a list of token counts to a list of costs."""

register_workload = registrar(WORKLOADS, "workload")

HIDDEN_SIZE_7B = 4096
DEFAULT_LINEAR_COEFF = 6 * HIDDEN_SIZE_7B
"""`a` in `a·L + L²` for a 7B-class model (hidden size h = 4096).

Per layer and per sequence of length L, a dense transformer spends about 12·h²·L multiply-adds in the
projections and the MLP (QKV + output: 4·h², MLP with 4·h inner width: 8·h², per token) and 2·h·L² in
attention (Q·Kᵀ and A·V). Dividing by 2·h gives `6·h·L + L²`, so `a = 6·h`. The linear term dominates for
L << 6·h (≈ 24k tokens at h = 4096); above it the quadratic attention term does. Kernels that skip the
masked half of causal attention halve the quadratic term: `a = 12·h` models them better.
"""


@register_workload("tokens")
def token_workload(token_counts: Sequence[int] | torch.Tensor) -> list[int]:
    """Cost of each sample as its token count (what a token budget or linear layers see).

    Args:
        token_counts: `(n,)` ints > 0, tokens per sample.
    """
    return check_token_counts(token_counts)


@register_workload("attention")
def attention_workload(
    token_counts: Sequence[int] | torch.Tensor, linear_coeff: Number = DEFAULT_LINEAR_COEFF
) -> list[Number]:
    """Cost of each sample as `linear_coeff·L + L²`: linear projection/MLP work plus quadratic attention.

    Args:
        token_counts: `(n,)` ints > 0, tokens per sample (L).
        linear_coeff: `a`, the weight of the linear term relative to `L²`; `6 · hidden_size` for a dense
            transformer (see DEFAULT_LINEAR_COEFF). Must be a finite number >= 0.
    """
    if type(linear_coeff) not in (int, float) or not 0 <= linear_coeff < float("inf"):
        raise BalancingError(f"linear_coeff must be a finite number >= 0 (e.g. 6 * hidden_size), got {linear_coeff!r}")
    counts = check_token_counts(token_counts)
    return [linear_coeff * length + length * length for length in counts]


def compute_workloads(
    token_counts: Sequence[int] | torch.Tensor, workload: str | WorkloadFn = "tokens"
) -> list[Number]:
    """Workload of each sample, by registered name (`"tokens"`, `"attention"`) or by a callable.

    Args:
        token_counts: `(n,)` ints > 0, tokens per sample.
        workload: a name in WORKLOADS, or a function from a list of token counts to a list of costs
            (e.g. `functools.partial(attention_workload, linear_coeff=6 * 8192)`).
    """
    counts = check_token_counts(token_counts)
    fn = lookup(WORKLOADS, workload, "workload") if isinstance(workload, str) else workload
    if not callable(fn):
        raise BalancingError(f"workload must be a name in {sorted(WORKLOADS)} or a callable, got {workload!r}")
    costs = list(fn(counts))
    if len(costs) != len(counts):
        raise BalancingError(f"workload function returned {len(costs)} costs for {len(counts)} samples")
    return costs
