"""A stable checksum of named tensors that trainer and engine compute independently and compare.

Definition (so that any engine, in any language, can reproduce it):

1. Each tensor's bytes are read as unsigned integers of its element width (1, 2 or 4 bytes; 8-byte
   dtypes are read as pairs of 4-byte words), flattened in row-major order: `u_0 .. u_{n-1}`.
2. `s = sum_i u_i * w_{i mod 2**19}  (mod 2**64)`, where `w` is a fixed table of odd weights in
   [1, 2**11) drawn from `torch.Generator().manual_seed(0)`. All arithmetic is integer, so the sum is
   exact and identical on every device and for every reduction order.
3. The digest is the SHA-256 hex of the lines `f"{name}\\t{dtype}\\t{shape}\\t{s}\\n"` of the tensors in
   name-sorted order.

Any change to one element changes `s` (odd weights are invertible mod 2**64), so a stale or partial update
is caught exactly, not within a float tolerance; reorderings are caught unless two swapped words share a
weight. The bit patterns are compared, so the trainer must send the dtype the engine stores.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import torch

_CHUNK = 2**19
"""Words per reduction chunk: 2**19 words * 2**32 max word * 2**11 max weight = 2**62 < int64 overflow."""
_WEIGHT_BITS = 10
_MOD = 2**64
_WORD_DTYPE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int32}
_WORD_MASK = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFFFFFF, 8: 0xFFFFFFFF}
_weight_cache: dict[torch.device, torch.Tensor] = {}
_GROUP_WORDS = 2**22
"""Tensors of at most `_CHUNK` words are summed together, up to this many words (32 MiB of int64) per pass: one
pass of a few ops instead of five ops per tensor, most of a small model's checksum time."""
_GROUP_LAYOUTS = 8
"""Layouts (device and tensor sizes) whose weight tensors are kept: a sync checksums the same ones."""
_layout_cache: OrderedDict[tuple, torch.Tensor] = OrderedDict()


def _weights(device: torch.device) -> torch.Tensor:
    table = _weight_cache.get(device)
    if table is None:
        generator = torch.Generator().manual_seed(0)
        table = torch.randint(0, 2**_WEIGHT_BITS, (_CHUNK,), generator=generator, dtype=torch.int64) * 2 + 1
        table = _weight_cache.setdefault(device, table.to(device))
    return table


def tensor_checksum(tensor: torch.Tensor) -> int:
    """The exact weighted sum `s` of one tensor's bit pattern (step 2 of the module doc), in [0, 2**64)."""
    return _sum_words(_words(tensor), tensor.element_size())


def _sum_words(words: torch.Tensor, width: int) -> int:
    """`tensor_checksum` of a tensor of element size `width` whose words (`_words`) are `words`."""
    table = _weights(words.device)
    total = 0
    for start in range(0, words.numel(), _CHUNK):
        chunk = words[start : start + _CHUNK].to(torch.int64).bitwise_and_(_WORD_MASK[width])
        total += int(chunk.mul_(table[: chunk.numel()]).sum())
    return total % _MOD


def _words(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor's bit pattern as a flat tensor of signed words of its element width (step 1 of the module doc)."""
    flat = tensor.detach().contiguous().reshape(-1)
    width = flat.element_size()
    if width not in _WORD_DTYPE:
        raise ValueError(f"cannot checksum dtype {flat.dtype} with element size {width}")
    return (flat.view(torch.uint8) if flat.dtype == torch.bool else flat).view(_WORD_DTYPE[width])


def _group_layout(device: torch.device, sizes: tuple[int, ...]) -> torch.Tensor:
    """For tensors of `sizes` words laid end to end: each word's weight."""
    key = (device, sizes)
    layout = _layout_cache.get(key)
    if layout is None:
        counts = torch.tensor(sizes, device=device)
        owner = torch.repeat_interleave(torch.arange(len(sizes), device=device), counts)
        starts = torch.cumsum(counts, dim=0) - counts
        position = torch.arange(int(counts.sum()), device=device) - starts[owner]
        layout = _layout_cache[key] = _weights(device)[position]
        while len(_layout_cache) > _GROUP_LAYOUTS:
            _layout_cache.popitem(last=False)
    _layout_cache.move_to_end(key)
    return layout


def _group_checksums(words: list[torch.Tensor], mask: int) -> list[int]:
    """`tensor_checksum` of word tensors of one device and width, each of at most `_CHUNK` words, in one pass.

    Each tensor's products are summed by a plain `sum` over its slice: the same exact integers as one `index_add_`
    over all of them into per-tensor slots, which took a third of a small model's checksum time."""
    sizes = tuple(w.numel() for w in words)
    products = torch.cat(words).to(torch.int64).bitwise_and_(mask).mul_(_group_layout(words[0].device, sizes))
    sums = torch.stack([part.sum() for part in products.split(sizes)])
    return [total % _MOD for total in sums.tolist()]


def tensor_checksums(tensors: Sequence[torch.Tensor]) -> list[int]:
    """`tensor_checksum` of each of `tensors`; small tensors of one device and element width are summed together."""
    sums = [0] * len(tensors)
    groups: dict[tuple[torch.device, int], list[tuple[int, torch.Tensor]]] = {}
    for index, tensor in enumerate(tensors):
        words = _words(tensor)
        if words.numel() > _CHUNK:
            sums[index] = _sum_words(words, tensor.element_size())
        elif words.numel():
            groups.setdefault((words.device, tensor.element_size()), []).append((index, words))
    for (_, width), members in groups.items():
        start = 0
        while start < len(members):
            end, total = start, 0
            while end < len(members) and total + members[end][1].numel() <= _GROUP_WORDS:
                total += members[end][1].numel()
                end += 1
            run = members[start:end]
            for (index, _), value in zip(run, _group_checksums([w for _, w in run], _WORD_MASK[width]), strict=True):
                sums[index] = value
            start = end
    return sums


def _record(name: str, tensor: torch.Tensor, checksum: int) -> str:
    """One tensor's line of the digest: its name, dtype, shape and `s`."""
    shape = "x".join(str(d) for d in tensor.shape)
    dtype = str(tensor.dtype).removeprefix("torch.")
    return f"{name}\t{dtype}\t{shape}\t{checksum}\n"


def checksum_records(named: Sequence[tuple[str, torch.Tensor]]) -> list[str]:
    """The line each `(name, tensor)` pair contributes to `weights_checksum` (step 3 of the module doc)."""
    sums = tensor_checksums([tensor for _, tensor in named])
    return [_record(name, tensor, value) for (name, tensor), value in zip(named, sums, strict=True)]


def digest_records(records: dict[str, str]) -> str:
    """SHA-256 hex over `checksum_records` lines keyed by name, in name order."""
    digest = hashlib.sha256()
    for name in sorted(records):
        digest.update(records[name].encode())
    return digest.hexdigest()


def weights_checksum(named: Iterable[tuple[str, torch.Tensor]]) -> str:
    """The SHA-256 digest over name-sorted `(name, tensor)` pairs defined in the module doc.

    Raises ValueError when a name appears twice.
    """
    pairs = list(named)
    records: dict[str, str] = {}
    for (name, _), record in zip(pairs, checksum_records(pairs), strict=True):
        if name in records:
            raise ValueError(f"tensor {name!r} appears twice in the checksum input")
        records[name] = record
    return digest_records(records)
