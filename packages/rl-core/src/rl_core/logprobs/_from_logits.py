"""Per-token log-probabilities and entropy from logits, computed in row chunks with bounded memory.

Only one `(chunk_size, V)` slice is ever upcast and normalised at a time, in forward and in backward;
the backward recomputes the slice's log-softmax instead of keeping the `(N, V)` one alive. The gradient
wrt the logits is `(N, V)` in the logits' dtype, as any gradient of them must be. Logits whose leading
dims cannot be flattened as a view (e.g. ``logits[:, :-1]``) are copied once by the flattening.
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
from rl_core.logprobs._chunk_math import chunk_backward, chunk_forward, compute_dtype, new_buffer

DEFAULT_CHUNK_SIZE = 1024
"""Rows per chunk. The extra memory is two `(chunk_size, V)` float32 buffers: 250 MiB at V = 32k, 1.2 GiB at
V = 152k, against 4 bytes * N * V for every full-size intermediate of the naive computation."""


class _Ctx(Protocol):
    """The autograd ctx as `_ChunkedLogSoftmaxStats` uses it; torch types it `FunctionCtx`, which declares
    none of it."""

    saved_tensors: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]
    needs_input_grad: tuple[bool, ...]
    temperature: float
    chunk_size: int

    def set_materialize_grads(self, value: bool, /) -> None: ...

    def save_for_backward(self, *tensors: torch.Tensor | None) -> None: ...


class _ChunkedLogSoftmaxStats(torch.autograd.Function):
    """`(N, V)` logits and `(N,)` labels -> `(N,)` log p[label] and `(N,)` entropy (or None)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: _Ctx,
        logits: torch.Tensor,
        labels: torch.Tensor,
        temperature: float,
        chunk_size: int,
        with_entropy: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        num_rows, vocab_size = logits.shape
        out_dtype = compute_dtype(logits.dtype)
        log_probs = logits.new_empty(num_rows, dtype=out_dtype)
        entropy = logits.new_empty(num_rows, dtype=out_dtype) if with_entropy else None
        buffer_rows = min(chunk_size, num_rows)
        first, second = (new_buffer(buffer_rows, vocab_size, logits.dtype, logits.device) for _ in range(2))
        for start in range(0, num_rows, chunk_size):
            rows = slice(start, start + chunk_size)
            chunk = logits[rows]
            workspace = (first[: len(chunk)], second[: len(chunk)])
            chunk_log_prob, chunk_entropy = chunk_forward(
                chunk, labels[rows], temperature, workspace, with_entropy=with_entropy
            )
            log_probs[rows] = chunk_log_prob
            if entropy is not None and chunk_entropy is not None:
                entropy[rows] = chunk_entropy
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(logits, labels, entropy)
        ctx.temperature = temperature
        ctx.chunk_size = chunk_size
        return log_probs, entropy

    @staticmethod
    @once_differentiable
    def backward(  # type: ignore[override]
        ctx: _Ctx, grad_log_probs: torch.Tensor | None, grad_entropy: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, None, None, None, None]:
        logits, labels, entropy = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        num_rows, vocab_size = logits.shape
        grad_logits = logits.new_empty(logits.shape)
        buffer_rows = min(ctx.chunk_size, num_rows)
        second = new_buffer(buffer_rows, vocab_size, logits.dtype, logits.device)
        # Logits already in the compute dtype get their gradient computed in place in `grad_logits`.
        in_place = compute_dtype(logits.dtype) == logits.dtype
        first = None if in_place else new_buffer(buffer_rows, vocab_size, logits.dtype, logits.device)
        for start in range(0, num_rows, ctx.chunk_size):
            rows = slice(start, start + ctx.chunk_size)
            chunk = logits[rows]
            workspace = (grad_logits[rows] if first is None else first[: len(chunk)], second[: len(chunk)])
            grad = chunk_backward(
                chunk,
                labels[rows],
                None if entropy is None else entropy[rows],
                None if grad_log_probs is None else grad_log_probs[rows],
                None if grad_entropy is None else grad_entropy[rows],
                ctx.temperature,
                workspace,
            )
            if first is not None:
                grad_logits[rows] = grad
        return grad_logits, None, None, None, None


def _run(
    logits: torch.Tensor,
    labels: torch.Tensor | None,
    temperature: float,
    chunk_size: int,
    *,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Validate, flatten to rows, apply the chunked Function and restore the leading shape."""
    check_scalars(temperature, chunk_size)
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1:
        found = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ShapeError(f"logits must be a tensor of shape (..., V) with at least one dim, got {found}")
    check_tensor("logits", logits, (*([None] * (logits.dim() - 1)), "V"), floating=True)
    vocab_size = logits.shape[-1]
    if vocab_size == 0:
        raise ShapeError(f"logits must have a non-empty vocabulary (last) dim, got shape {tuple(logits.shape)}")
    lead = tuple(logits.shape[:-1])
    if labels is None:
        # Entropy alone needs no labels; any in-range id keeps the shared code path.
        flat_labels = torch.zeros(logits.numel() // vocab_size, dtype=torch.int64, device=logits.device)
    else:
        check_tensor("labels", labels, lead)
        check_same_device(logits=logits, labels=labels)
        flat_labels = check_labels(labels, vocab_size, "logits' last dim")
    # torch leaves Function.apply unannotated (a stub gap); it returns what forward returns.
    log_probs, entropy = cast(
        "tuple[torch.Tensor, torch.Tensor | None]",
        _ChunkedLogSoftmaxStats.apply(  # pyright: ignore[reportUnknownMemberType]
            logits.reshape(-1, vocab_size), flat_labels, float(temperature), chunk_size, with_entropy
        ),
    )
    return log_probs.reshape(lead), None if entropy is None else entropy.reshape(lead)


def log_probs_from_logits(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> torch.Tensor:
    """Log-probability of each label under ``softmax(logits / temperature)``.

    Args:
        logits: `(..., V)` float (bf16/fp16 are upcast per chunk; the result is float32, or float64
            for float64 logits).
        labels: `(...)` integer token ids in ``[0, V)``.
        temperature: > 0; divides the logits before the softmax, as the sampler did.
        chunk_size: rows of logits processed at once; bounds the extra memory to a few
            `(chunk_size, V)` float32 buffers.

    Returns:
        `(...)` log-probabilities, differentiable wrt `logits`.
    """
    log_probs, _ = _run(logits, labels, temperature, chunk_size, with_entropy=False)
    return log_probs


def entropy_from_logits(
    logits: torch.Tensor, *, temperature: float = 1.0, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> torch.Tensor:
    """Entropy ``-sum(p * log p)`` of ``p = softmax(logits / temperature)`` per row.

    Args:
        logits: `(..., V)` float; see `log_probs_from_logits` for dtypes, `temperature`, `chunk_size`.

    Returns:
        `(...)` entropies (float32, or float64 for float64 logits), differentiable wrt `logits`.
    """
    _, entropy = _run(logits, None, temperature, chunk_size, with_entropy=True)
    return cast(torch.Tensor, entropy)


def log_probs_and_entropy_from_logits(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both `log_probs_from_logits` and `entropy_from_logits`, sharing one log-softmax per chunk.

    Args:
        logits: `(..., V)` float.
        labels: `(...)` integer token ids in ``[0, V)``.

    Returns:
        `(log_probs, entropy)`, each `(...)`, differentiable wrt `logits` through either or both.
    """
    log_probs, entropy = _run(logits, labels, temperature, chunk_size, with_entropy=True)
    return log_probs, cast(torch.Tensor, entropy)
