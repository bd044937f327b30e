"""Argument checks shared by the log-prob functions: temperature, chunk size and label range."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

import math

import torch

from rl_core._errors import ShapeError
from rl_core._validation import check_positive

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def check_scalars(temperature: float, chunk_size: int) -> None:
    """Raise `ValueError` unless `temperature` is a finite number > 0 and `chunk_size` an int > 0."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    check_positive("temperature", temperature)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise ValueError(f"chunk_size must be an int > 0 (rows per chunk), got {chunk_size!r}")
    check_positive("chunk_size", chunk_size)


def check_labels(labels: torch.Tensor, vocab_size: int, vocab_source: str) -> torch.Tensor:
    """Return `labels` flattened to int64 after checking its dtype and that every id lies in ``[0, V)``.

    `vocab_source` names where V came from, for the message (e.g. "logits' last dim").
    """
    if labels.dtype not in _INTEGER_DTYPES:
        raise ShapeError(f"labels must have an integer dtype (token ids), got {labels.dtype}")
    flat = labels.reshape(-1).to(torch.int64)
    if flat.numel() == 0:
        return flat
    low, high = (int(v) for v in torch.aminmax(flat))
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"labels must lie in [0, V) = [0, {vocab_size}) (V is {vocab_source}), got values in [{low}, {high}]"
        )
    return flat
