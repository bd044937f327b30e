"""Log-softmax statistics of one row chunk of logits, and their gradient, in a float32-or-wider dtype.

For one row let ``z = logits / temperature``, ``log p = log_softmax(z)`` and ``H = -sum(p * log p)``.
The backward passes recompute ``log p`` from the chunk's logits and use

    d log p[y] / dz = onehot(y) - p
    d H / dz_j      = -p_j * (log p_j + H)

(the second from ``H = logsumexp(z) - sum(p * z)`` and ``dp_i / dz_j = p_i * (delta_ij - p_j)``), so an
upstream pair ``(g_lp, g_H)`` gives ``dz = g_lp * onehot(y) - p * (g_lp + g_H * (log p + H))`` and
``dlogits = dz / temperature``. Tokens with ``p = 0`` (logits of ``-inf``, a masked vocabulary entry)
contribute nothing to the entropy or to either gradient.

Every chunk of one pass writes into the same two `(chunk_size, V)` workspace buffers (row slices of
them for the last, shorter chunk): allocating them afresh per chunk costs more than the arithmetic on
CPU, where freed large blocks go back to the OS.
"""

from __future__ import annotations

from typing import Literal, overload

import torch

Workspace = tuple[torch.Tensor, torch.Tensor]
"""Two `(C, V)` scratch buffers in the compute dtype; a chunk may overwrite both."""

_LOG_P_FLOOR = -1.0e4
"""exp() of anything below about -745 (float64) or -104 (float32) is exactly 0, so flooring log p here
changes no probability; it only keeps ``0 * log p`` finite (0, not nan) at masked ``-inf`` tokens."""


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a chunk is computed in: bf16/fp16 upcast to float32, float64 kept."""
    return torch.promote_types(dtype, torch.float32)


def new_buffer(rows: int, vocab: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """One `(rows, V)` workspace buffer in the compute dtype of `dtype` logits."""
    return torch.empty(rows, vocab, dtype=compute_dtype(dtype), device=device)


def _scaled_log_softmax(logits: torch.Tensor, temperature: float, workspace: Workspace, scratch: bool) -> torch.Tensor:
    """``log_softmax(logits / temperature)`` of a `(C, V)` chunk, written into ``workspace[1]``.

    `scratch=True` lets the division happen in place in `logits` (a buffer the caller no longer needs).
    """
    first, second = workspace
    if temperature == 1.0:
        return torch.log_softmax(logits, dim=-1, dtype=second.dtype, out=second)
    if scratch and logits.dtype == first.dtype:
        scaled = logits.div_(temperature)
    else:
        scaled = first.copy_(logits).div_(temperature)
    return torch.log_softmax(scaled, dim=-1, out=second)


@overload
def chunk_forward(
    logits: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    workspace: Workspace,
    *,
    with_entropy: Literal[True],
    scratch: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]: ...


@overload
def chunk_forward(
    logits: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    workspace: Workspace,
    *,
    with_entropy: bool,
    scratch: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]: ...


def chunk_forward(
    logits: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    workspace: Workspace,
    *,
    with_entropy: bool,
    scratch: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(log p[label], entropy or None)``, each `(C,)`, of a `(C, V)` chunk with `(C,)` int64 labels.

    `scratch=True` allows overwriting `logits`.
    """
    log_p = _scaled_log_softmax(logits, temperature, workspace, scratch)
    log_prob = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return log_prob, None
    log_p.clamp_(min=_LOG_P_FLOOR)
    p_log_p = torch.exp(log_p, out=workspace[0]).mul_(log_p)
    return log_prob, p_log_p.sum(dim=-1).neg_()


def chunk_backward(
    logits: torch.Tensor,
    labels: torch.Tensor,
    entropy: torch.Tensor | None,
    grad_log_prob: torch.Tensor | None,
    grad_entropy: torch.Tensor | None,
    temperature: float,
    workspace: Workspace,
    *,
    scratch: bool = False,
) -> torch.Tensor:
    """Gradient wrt a `(C, V)` logits chunk, in the compute dtype, given the forward's `(C,)` entropy.

    `grad_log_prob` / `grad_entropy` are the `(C,)` upstream gradients; None means zero. The result
    lives in ``workspace[0]``: use it before the next chunk. `scratch=True` allows overwriting `logits`.
    """
    log_p = _scaled_log_softmax(logits, temperature, workspace, scratch).clamp_(min=_LOG_P_FLOOR)
    dtype = log_p.dtype
    p = torch.exp(log_p, out=workspace[0])
    if grad_entropy is not None and entropy is not None:
        coefficient = log_p.add_(entropy.unsqueeze(-1)).mul_(grad_entropy.unsqueeze(-1).to(dtype))
        if grad_log_prob is not None:
            coefficient.add_(grad_log_prob.unsqueeze(-1).to(dtype))
        grad = p.mul_(coefficient).neg_()
    elif grad_log_prob is not None:
        grad = p.mul_(grad_log_prob.unsqueeze(-1).to(dtype)).neg_()
    else:
        return p.zero_()
    if grad_log_prob is not None:
        grad.scatter_add_(-1, labels.unsqueeze(-1), grad_log_prob.unsqueeze(-1).to(dtype))
    return grad.div_(temperature) if temperature != 1.0 else grad
