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
from collections.abc import Iterable

import torch

_CHUNK = 2**19
"""Words per reduction chunk: 2**19 words * 2**32 max word * 2**11 max weight = 2**62 < int64 overflow."""
_WEIGHT_BITS = 10
_MOD = 2**64
_WORD_DTYPE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int32}
_WORD_MASK = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFFFFFF, 8: 0xFFFFFFFF}
_weight_cache: dict[torch.device, torch.Tensor] = {}


def _weights(device: torch.device) -> torch.Tensor:
    table = _weight_cache.get(device)
    if table is None:
        generator = torch.Generator().manual_seed(0)
        table = torch.randint(0, 2**_WEIGHT_BITS, (_CHUNK,), generator=generator, dtype=torch.int64) * 2 + 1
        table = _weight_cache.setdefault(device, table.to(device))
    return table


def tensor_checksum(tensor: torch.Tensor) -> int:
    """The exact weighted sum `s` of one tensor's bit pattern (step 2 of the module doc), in [0, 2**64)."""
    flat = tensor.detach().contiguous().reshape(-1)
    if flat.numel() == 0:
        return 0
    width = flat.element_size()
    if width not in _WORD_DTYPE:
        raise ValueError(f"cannot checksum dtype {flat.dtype} with element size {width}")
    words = flat.view(torch.uint8) if flat.dtype == torch.bool else flat
    words = words.view(_WORD_DTYPE[width])
    table = _weights(words.device)
    total = 0
    for start in range(0, words.numel(), _CHUNK):
        chunk = words[start : start + _CHUNK].to(torch.int64).bitwise_and_(_WORD_MASK[width])
        total += int(chunk.mul_(table[: chunk.numel()]).sum())
    return total % _MOD


def checksum_record(name: str, tensor: torch.Tensor) -> str:
    """The line one tensor contributes to `weights_checksum` (step 3 of the module doc)."""
    shape = "x".join(str(d) for d in tensor.shape)
    dtype = str(tensor.dtype).removeprefix("torch.")
    return f"{name}\t{dtype}\t{shape}\t{tensor_checksum(tensor)}\n"


def digest_records(records: dict[str, str]) -> str:
    """SHA-256 hex over `checksum_record` lines keyed by name, in name order."""
    digest = hashlib.sha256()
    for name in sorted(records):
        digest.update(records[name].encode())
    return digest.hexdigest()


def weights_checksum(named: Iterable[tuple[str, torch.Tensor]]) -> str:
    """The SHA-256 digest over name-sorted `(name, tensor)` pairs defined in the module doc.

    Raises ValueError when a name appears twice.
    """
    records: dict[str, str] = {}
    for name, tensor in named:
        if name in records:
            raise ValueError(f"tensor {name!r} appears twice in the checksum input")
        records[name] = checksum_record(name, tensor)
    return digest_records(records)
