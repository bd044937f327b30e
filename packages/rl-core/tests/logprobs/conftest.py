"""The naive reference the chunked log-prob functions must match: full log-softmax, gather, sum."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

NaiveStats = Callable[[torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, torch.Tensor]]


def _naive_stats(logits: torch.Tensor, labels: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`(..., V)` logits (already in the dtype to compute in) -> `(...)` log p[label] and entropy, unchunked."""
    log_p = torch.log_softmax(logits / temperature, dim=-1)
    log_probs = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return log_probs, entropy


@pytest.fixture
def naive_stats() -> NaiveStats:
    """The unchunked reference: `(logits, labels, temperature) -> (log_probs, entropy)`."""
    return _naive_stats


class NewBufferSizes(TorchDispatchMode):
    """Records the element count of every tensor an op returns that aliases none of its inputs.

    Views and in-place results share an input's storage and are skipped, so `sizes` lists the buffers
    actually allocated while the mode is active (forward or backward).
    """

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_dispatch__(
        self, func: Callable[..., object], types: object, args: tuple = (), kwargs: dict | None = None
    ) -> object:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        self.sizes += [
            t.numel()
            for t in tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs
        ]
        return out


@pytest.fixture
def new_buffer_sizes() -> type[NewBufferSizes]:
    """The `NewBufferSizes` dispatch mode, to use as ``with new_buffer_sizes() as seen: ...``."""
    return NewBufferSizes
