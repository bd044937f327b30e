"""Per-token log-probabilities and entropy straight from hidden states and the LM-head weight.

The `(N, V)` logits are never materialised: each `(chunk_size, H)` slice of hidden states is projected
to `(chunk_size, V)` logits, reduced to log-prob and entropy, and dropped; the backward reprojects the
slice and turns its logit gradient into gradients for the hidden states, the weight and the bias.
"""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from typing import Protocol, cast

import torch
from torch.autograd.function import once_differentiable

from rl_core._errors import ShapeError
from rl_core._validation import check_same_device, check_tensor
from rl_core.logprobs._checks import check_labels, check_scalars
from rl_core.logprobs._chunk_math import (
    Workspace,
    chunk_backward,
    chunk_forward,
    compute_dtype,
    new_buffer,
)
from rl_core.logprobs._from_logits import DEFAULT_CHUNK_SIZE


def _project(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    workspace: Workspace,
    out: torch.Tensor | None,
) -> torch.Tensor:
    """``hidden @ weight.T + bias`` for a `(C, H)` chunk, written into `out` or, if None, ``workspace[0]``."""
    target = workspace[0] if out is None else out[: hidden.shape[0]]
    if bias is None:
        return torch.mm(hidden, weight.T, out=target)
    return torch.addmm(bias, hidden, weight.T, out=target)


def _buffers(hidden: torch.Tensor, weight: torch.Tensor, chunk_size: int) -> tuple[Workspace, torch.Tensor | None]:
    """The chunk workspace, and a separate logits buffer when the logits' dtype is not the compute dtype."""
    rows = min(chunk_size, hidden.shape[0])
    first, second = (new_buffer(rows, weight.shape[0], hidden.dtype, hidden.device) for _ in range(2))
    # Same-dtype logits go straight into the workspace, which the chunk math may overwrite.
    same_dtype = compute_dtype(hidden.dtype) == hidden.dtype
    return (first, second), None if same_dtype else hidden.new_empty(rows, weight.shape[0])


_MM_OUT_DTYPE = hasattr(torch.ops.aten.mm, "dtype")
"""Whether this torch has `torch.mm(..., out_dtype=)`: a bf16/fp16 GEMM with a float32 output, on CUDA."""


def _accumulate_weight_grad(
    grad_weight: torch.Tensor, grad_logits: torch.Tensor, low_precision: torch.Tensor | None, chunk: torch.Tensor
) -> None:
    """``grad_weight += grad_logits.T @ chunk`` for a `(V, H)` float32-or-wider accumulator, `(C, V)` logit gradient
    and `(C, H)` chunk. A bf16/fp16 chunk on CUDA multiplies the logit gradient's copy in the chunk's dtype (the one
    the hidden-state gradient uses, as plain autograd would) on the tensor cores with a float32 output; with float32
    operands the GEMM would run without tensor cores while TF32 is off (bench/README.md, the H100 figures)."""
    if low_precision is not None and chunk.is_cuda and _MM_OUT_DTYPE:
        grad_weight += torch.mm(low_precision.T, chunk, out_dtype=grad_weight.dtype)
    else:
        grad_weight.addmm_(grad_logits.T, chunk.to(grad_weight.dtype))


class _Ctx(Protocol):
    """The autograd ctx as `_ChunkedLinearLogSoftmaxStats` uses it; torch types it `FunctionCtx`, which declares
    none of it."""

    saved_tensors: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]
    needs_input_grad: tuple[bool, ...]
    temperature: float
    chunk_size: int

    def set_materialize_grads(self, value: bool, /) -> None: ...

    def save_for_backward(self, *tensors: torch.Tensor | None) -> None: ...


class _ChunkedLinearLogSoftmaxStats(torch.autograd.Function):
    """`(N, H)` hidden, `(V, H)` weight, `(V,)` bias or None, `(N,)` labels -> `(N,)` log-probs, `(N,)` entropy."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: _Ctx,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        labels: torch.Tensor,
        temperature: float,
        chunk_size: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        num_rows = hidden.shape[0]
        out_dtype = compute_dtype(hidden.dtype)
        log_probs = hidden.new_empty(num_rows, dtype=out_dtype)
        entropy = hidden.new_empty(num_rows, dtype=out_dtype)
        full_workspace, logits_buffer = _buffers(hidden, weight, chunk_size)
        for start in range(0, num_rows, chunk_size):
            rows = slice(start, start + chunk_size)
            chunk = hidden[rows]
            workspace = (full_workspace[0][: len(chunk)], full_workspace[1][: len(chunk)])
            logits = _project(chunk, weight, bias, workspace, logits_buffer)
            log_probs[rows], entropy[rows] = chunk_forward(
                logits, labels[rows], temperature, workspace, with_entropy=True, scratch=True
            )
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(hidden, weight, bias, labels, entropy)
        ctx.temperature = temperature
        ctx.chunk_size = chunk_size
        return log_probs, entropy

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: _Ctx, grad_log_probs: torch.Tensor | None, grad_entropy: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None, None, None, None]:
        hidden, weight, bias, labels, entropy = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        accumulate_dtype = compute_dtype(weight.dtype)
        grad_hidden = hidden.new_empty(hidden.shape) if need_hidden else None
        # Summed over chunks in float32 (or wider) so bf16/fp16 weights lose nothing to per-chunk rounding.
        grad_weight = torch.zeros_like(weight, dtype=accumulate_dtype) if need_weight else None
        grad_bias = torch.zeros_like(bias, dtype=accumulate_dtype) if bias is not None and need_bias else None
        full_workspace, logits_buffer = _buffers(hidden, weight, ctx.chunk_size)
        for start in range(0, hidden.shape[0], ctx.chunk_size):
            rows = slice(start, start + ctx.chunk_size)
            chunk = hidden[rows]
            workspace = (full_workspace[0][: len(chunk)], full_workspace[1][: len(chunk)])
            grad_logits = chunk_backward(
                _project(chunk, weight, bias, workspace, logits_buffer),
                labels[rows],
                entropy[rows],
                None if grad_log_probs is None else grad_log_probs[rows],
                None if grad_entropy is None else grad_entropy[rows],
                ctx.temperature,
                workspace,
                scratch=True,
            )
            low_precision = None if logits_buffer is None else logits_buffer[: len(chunk)].copy_(grad_logits)
            if grad_hidden is not None:
                torch.mm(grad_logits if low_precision is None else low_precision, weight, out=grad_hidden[rows])
            if grad_weight is not None:
                _accumulate_weight_grad(grad_weight, grad_logits, low_precision, chunk)
            if grad_bias is not None:
                grad_bias += grad_logits.sum(dim=0)
        return (
            grad_hidden,
            None if grad_weight is None else grad_weight.to(weight.dtype),
            None if grad_bias is None else grad_bias.to(weight.dtype),
            None,
            None,
            None,
        )


def _check_hidden_arguments(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, bias: torch.Tensor | None
) -> None:
    """Shapes, dtypes and devices of `log_probs_and_entropy_from_hidden`'s tensor arguments."""
    if isinstance(hidden, torch.Tensor) and hidden.dim() == 3:
        hidden_shape, labels_shape = ("B", "T", "H"), ("B", "T")
    elif isinstance(hidden, torch.Tensor) and hidden.dim() != 2:
        raise ShapeError(f"hidden must have shape (N, H) or (B, T, H), got {tuple(hidden.shape)}")
    else:
        hidden_shape, labels_shape = ("N", "H"), ("N",)
    dims: dict[str, int] = {}
    check_tensor("hidden", hidden, hidden_shape, dims=dims, floating=True)
    check_tensor("weight", weight, ("V", "H"), dims=dims, dtype=hidden.dtype)
    if dims["V"] == 0:
        raise ShapeError(f"weight must have a non-empty vocabulary (first) dim, got shape {tuple(weight.shape)}")
    if bias is not None:
        check_tensor("bias", bias, ("V",), dims=dims, dtype=hidden.dtype)
    check_tensor("labels", labels, labels_shape, dims=dims)
    check_same_device(hidden=hidden, weight=weight, bias=bias, labels=labels)


def log_probs_and_entropy_from_hidden(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each label and the entropy under ``softmax((hidden @ weight.T + bias) / temperature)``.

    Equal to `log_probs_and_entropy_from_logits` applied to the LM head's logits, without ever holding
    all of them: memory beyond the inputs and their gradients is two `(chunk_size, V)` float32 buffers
    (three for bf16/fp16 inputs), plus a float32 `(V, H)` accumulator for a bf16/fp16 weight's gradient.

    Args:
        hidden: `(N, H)` or `(B, T, H)` float final hidden states.
        weight: `(V, H)` LM-head weight, same dtype as `hidden`.
        labels: `(N,)` or `(B, T)` integer token ids in ``[0, V)``.
        bias: `(V,)` LM-head bias, same dtype as `hidden`, or None.
        temperature: > 0; divides the logits before the softmax, as the sampler did.
        chunk_size: rows of `hidden` projected at once.

    Returns:
        `(log_probs, entropy)`, each shaped like `labels` (float32, or float64 for float64 inputs),
        differentiable wrt `hidden`, `weight` and `bias`.
    """
    check_scalars(temperature, chunk_size)
    _check_hidden_arguments(hidden, weight, labels, bias)
    flat_labels = check_labels(labels, weight.shape[0], "weight's first dim")
    # torch leaves Function.apply unannotated (a stub gap); it returns what forward returns.
    log_probs, entropy = cast(
        "tuple[torch.Tensor, torch.Tensor]",
        _ChunkedLinearLogSoftmaxStats.apply(  # pyright: ignore[reportUnknownMemberType]
            hidden.reshape(-1, hidden.shape[-1]), weight, bias, flat_labels, float(temperature), chunk_size
        ),
    )
    return log_probs.reshape(labels.shape), entropy.reshape(labels.shape)
