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
from rl_runtime.workers._errors import StepDataError
from rl_runtime.workers._step_data import Sample, StepData, stack_samples

PAD_VALUE = 0
"""What padding holds in every field: the pad token id, mask 0, and 0 in the per-token floats (all masked out)."""


def pad_stack(name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    """The samples' tensors of field `name` stacked on a new dim 0, each padded at the end of its first dim (a
    sample's `T`, `L` or `S`: the one a producer pads to its batch) with `PAD_VALUE` to the longest among them:
    `(T,)` rows of different `T` become `(B, max T)`, right-padded.

    Raises StepDataError when the tensors differ in rank or in any other dim (an image size, an action chunk: no
    producer pads those, so no padding makes them one field).
    """
    first = tensors[0].shape
    if any(tensor.dim() != len(first) or tensor.shape[1:] != first[1:] for tensor in tensors):
        shapes = sorted({tuple(tensor.shape) for tensor in tensors})
        raise StepDataError(
            f"the samples' {name!r} tensors have shapes {shapes[:4]}{' ...' if len(shapes) > 4 else ''}: samples of "
            f"several producers may differ only in their first dim (the padded length); every producer of the edge "
            f"must give {name!r} the same number of dims and the same size in the others"
        )
    # Stacked by runs of one shape (a producer's samples arrive together), each run padded once: half the time of
    # padding each row (bench/README.md, "Figures behind the docstrings").
    runs, start = [], 0
    for end in range(1, len(tensors) + 1):
        if end == len(tensors) or tensors[end].shape != tensors[start].shape:
            runs.append(torch.stack(tensors[start:end]))
            start = end
    return pad_cat(name, runs)


def pad_cat(name: str, batches: Sequence[torch.Tensor]) -> torch.Tensor:
    """`batches` `(B_i, ...)` of field `name` joined on dim 0, each multi-dim one padded at the end of its dim 1
    (`T`, `L` or `S`) with `PAD_VALUE` to the longest among them.

    Raises StepDataError when they differ in rank or in a dim past dim 1 (no producer pads those).
    """
    first = batches[0].shape
    if len(first) < 2:
        return torch.cat(list(batches))
    if any(batch.dim() != len(first) or batch.shape[2:] != first[2:] for batch in batches):
        shapes = [tuple(batch.shape) for batch in batches]
        raise StepDataError(
            f"field {name!r} has shapes {shapes} in the parts to join: they may differ only in dim 1 (the padded "
            "length); every producer must give it the same dims and sizes past that"
        )
    width = max(batch.shape[1] for batch in batches)
    return torch.cat([_pad_to(batch, [width, *first[2:]]) for batch in batches])


def _pad_to(batch: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """`batch` (B, ...) padded with PAD_VALUE at the end of each dim past the first to `shape`."""
    if list(batch.shape[1:]) == list(shape):
        return batch
    out = batch.new_full((batch.shape[0], *shape), PAD_VALUE)
    out[tuple(slice(0, size) for size in batch.shape)] = batch
    return out


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


def stack_padded(samples: Sequence[Sample], *, always_trim: bool = True) -> StepData:
    """One StepData of `samples` (from any producer batches), in order: each field padded to the largest sample
    (`pad_stack`), then trimmed to the longest sample, so its `T` is what one producer would give the same samples.

    With `always_trim=False` the trim runs only when some field needed padding (the samples came from producers of
    different widths): samples of one width arrive exactly as their producer stacked them.
    """
    padded = False

    def stack(name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
        nonlocal padded
        try:
            return torch.stack(tensors)
        except RuntimeError:
            padded = True
            return pad_stack(name, tensors)

    data = stack_samples(samples, stack)
    return trim_padding(data) if padded or always_trim else data
