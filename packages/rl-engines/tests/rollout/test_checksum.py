"""The weights checksum against an independent pure-Python implementation of its definition."""

from __future__ import annotations

import hashlib

import pytest
import torch

from rl_engines.rollout import tensor_checksum, weights_checksum

CHUNK = 2**19


def _weight_table() -> list[int]:
    generator = torch.Generator().manual_seed(0)
    return (torch.randint(0, 2**10, (CHUNK,), generator=generator, dtype=torch.int64) * 2 + 1).tolist()


TABLE = _weight_table()


def reference_sum(tensor: torch.Tensor) -> int:
    """Step 2 of the definition with Python integers over the raw little-endian bytes."""
    raw = bytes(tensor.contiguous().reshape(-1).view(torch.uint8).tolist())
    width = min(tensor.element_size(), 4)
    words = [int.from_bytes(raw[i : i + width], "little") for i in range(0, len(raw), width)]
    return sum(word * TABLE[i % CHUNK] for i, word in enumerate(words)) % 2**64


def reference_digest(named: dict[str, torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for name in sorted(named):
        t = named[name]
        shape = "x".join(str(d) for d in t.shape)
        digest.update(f"{name}\t{str(t.dtype).removeprefix('torch.')}\t{shape}\t{reference_sum(t)}\n".encode())
    return digest.hexdigest()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8, torch.bool])
def test_tensor_checksum_matches_reference(dtype: torch.dtype) -> None:
    values = torch.randn(7, 5, generator=torch.Generator().manual_seed(1)) * 50
    tensor = values > 0 if dtype == torch.bool else values.to(dtype)
    assert tensor_checksum(tensor) == reference_sum(tensor)


def test_checksum_crosses_chunks_exactly() -> None:
    tensor = torch.randint(-128, 128, (CHUNK + 7,), dtype=torch.int8, generator=torch.Generator().manual_seed(2))
    assert tensor_checksum(tensor) == reference_sum(tensor)


def test_non_contiguous_tensor_is_read_in_row_major_order() -> None:
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert tensor_checksum(tensor.t()) == tensor_checksum(tensor.t().contiguous())
    assert tensor_checksum(tensor.t()) != tensor_checksum(tensor)


def test_weights_checksum_matches_reference_and_ignores_order() -> None:
    named = {"b": torch.ones(3), "a": torch.arange(4.0).bfloat16(), "c": torch.zeros(0)}
    assert weights_checksum(named.items()) == reference_digest(named)
    assert weights_checksum(reversed(list(named.items()))) == reference_digest(named)


def test_any_single_bit_flip_changes_the_checksum() -> None:
    tensor = torch.randn(1000, generator=torch.Generator().manual_seed(3))
    base = tensor_checksum(tensor)
    bits = tensor.view(torch.int32)
    for index in (0, 499, 999):
        for bit in (0, 17, 31):
            flipped = bits.clone()
            flipped[index] ^= torch.tensor(1 << bit if bit < 31 else -(2**31), dtype=torch.int32)
            assert tensor_checksum(flipped.view(torch.float32)) != base


def test_digest_covers_dtype_shape_and_name() -> None:
    ones = torch.ones(4)
    base = weights_checksum([("w", ones)])
    assert weights_checksum([("w", ones.view(2, 2))]) != base
    assert weights_checksum([("w", ones.view(torch.int32))]) != base
    assert weights_checksum([("v", ones)]) != base


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="'w' appears twice"):
        weights_checksum([("w", torch.ones(1)), ("w", torch.ones(1))])
