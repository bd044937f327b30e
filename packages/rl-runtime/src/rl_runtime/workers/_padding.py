"""Samples of several producer batches into one batch: each field padded to the widest sample, then trimmed.

A producer pads its batch to its own longest sample, so two producers' `(B, T)` fields differ in `T` (a sample of
one carries its batch's `(T,)`). Every multi-dim field of the sample schema is right-padded and holds 0 on its
padding: rows are `[prompt | response | padding]` (`rl_core.schema`: `input_ids` "right-padded"), the masks are 0
there, and the per-token floats (`old_log_probs`, `ref_log_probs`, `rollout_log_probs`, `values`, `advantages`,
`returns`, rewards) are 0 there as their producers write them; `instruction_ids` / `instruction_mask` (`(B, L)`) and
the per-step embodied fields (`(B, S, ...)`) are right-padded with 0 too. So padding each field at the end of every
dim with `PAD_VALUE` gives the batch its producer would have built from the same samples.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_core.schema import ATTENTION_MASK, SAMPLE_FIELDS
from rl_runtime.workers._step_data import Sample, StepData, stack_samples

PAD_VALUE = 0
"""What padding holds in every field: the pad token id, mask 0, and 0 in the per-token floats (all masked out)."""


def _padded(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    if tuple(tensor.shape) == tuple(shape):
        return tensor
    out = tensor.new_full(tuple(shape), PAD_VALUE)
    out[tuple(slice(0, size) for size in tensor.shape)] = tensor
    return out


def pad_samples(samples: Sequence[Sample]) -> list[Sample]:
    """`samples` with each tensor padded at the end of every dim, with `PAD_VALUE`, to the largest among them.

    A `(B, T)` field is `(T,)` per sample: padded on the right to the longest `T`. Per-sample scalars (`(B,)`
    fields) are left alone. A field whose rank differs between samples is left as is (stacking it then fails).
    """
    shapes: dict[str, list[int]] = {}
    for sample in samples:
        for name, tensor in sample.tensors.items():
            widest = shapes.setdefault(name, list(tensor.shape))
            if len(widest) == tensor.dim():
                shapes[name] = [max(a, b) for a, b in zip(widest, tensor.shape, strict=True)]
    return [
        Sample(
            {
                name: _padded(tensor, shapes[name]) if len(shapes[name]) == tensor.dim() else tensor
                for name, tensor in sample.tensors.items()
            },
            sample.extras,
        )
        for sample in samples
    ]


def _token_aligned(name: str, tensor: torch.Tensor, width: int) -> bool:
    spec = SAMPLE_FIELDS.get(name)
    if spec is not None and spec.level != "token":
        return False  # e.g. `instruction_ids` (B, L): its width is not the rows' even when the numbers agree
    return tensor.dim() >= 2 and tensor.shape[1] == width


def trim_padding(data: StepData) -> StepData:
    """`data` with the trailing columns no sample uses (all-zero `attention_mask`) cut from every `(B, T)` field.

    Token-level schema fields and unnamed tensors whose dim 1 has `attention_mask`'s width are trimmed; other
    fields are kept whole. Without an `attention_mask` the data is returned as it is.
    """
    mask = data.batch.get(ATTENTION_MASK)
    if mask is None or mask.dim() != 2 or not mask.any():
        return data
    width = mask.shape[1]
    used = int(mask.any(dim=0).nonzero().max()) + 1
    if used == width:
        return data
    batch = {
        name: tensor[:, :used] if _token_aligned(name, tensor, width) else tensor for name, tensor in data.batch.items()
    }
    return StepData(batch, data.extras, data.metrics)


def stack_padded(samples: Sequence[Sample]) -> StepData:
    """One StepData of `samples` (from any producer batches), in order: padded to common widths, then trimmed to
    the longest sample, so its `T` is what one producer would have given the same samples."""
    return trim_padding(stack_samples(pad_samples(samples)))
