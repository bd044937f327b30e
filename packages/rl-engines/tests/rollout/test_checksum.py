"""The weights checksum against an independent pure-Python implementation of its definition."""

from __future__ import annotations

import hashlib

import pytest
import torch

from rl_engines.rollout import _checksum, tensor_checksum, weights_checksum
from rl_engines.rollout._checksum import tensor_checksums

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


def _mixed_tensors() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    values = torch.randn(CHUNK + 9, generator=generator) * 1000
    all_ones = torch.full((CHUNK,), -1, dtype=torch.int32)  # the largest word at every weight: no overflow
    return [
        values[:40].reshape(8, 5).t(),
        all_ones,
        torch.zeros(0),
        values[:33].bfloat16(),
        values.to(torch.float64)[:11],
        values,  # past one chunk: summed on its own
        values[:6] > 0,
        values[:17].to(torch.int8),
        values[100:131],
    ]


def test_tensors_summed_together_get_their_own_checksums() -> None:
    tensors = _mixed_tensors()
    assert tensor_checksums(tensors) == [tensor_checksum(t) for t in tensors]
    assert tensor_checksums(tensors[:1]) == [reference_sum(tensors[0].contiguous())]
    assert tensor_checksums(tensors[1:2]) == [reference_sum(tensors[1])]


def test_groups_split_at_their_word_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    tensors = [torch.arange(n, dtype=torch.float32) for n in (5, 9, 3, 12, 1)]
    expected = [tensor_checksum(t) for t in tensors]
    monkeypatch.setattr(_checksum, "_GROUP_WORDS", 12)
    assert tensor_checksums(tensors) == expected
