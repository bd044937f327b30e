"""The shared Llama-family layer's rotary embedding against transformers' own."""

from __future__ import annotations

import pytest
import torch
from transformers.models.llama.modeling_llama import rotate_half

from rl_engines._llama_family import rotary, rotate


@pytest.mark.parametrize(
    ("x_shape", "table_shape"),
    [((5, 4, 8), (5, 1, 8)), ((3, 2, 6, 8), (3, 1, 6, 8))],
    ids=["decode-step", "prefill"],
)
def test_rotate_is_bitwise_transformers_rotary_embedding_and_its_gradient(x_shape, table_shape) -> None:
    generator = torch.Generator().manual_seed(0)
    angles = torch.randn(table_shape, generator=generator) * 10
    cos, sin = angles.cos(), angles.sin()
    x = torch.randn(x_shape, generator=generator, requires_grad=True)
    want = x * cos + rotate_half(x) * sin  # transformers' apply_rotary_pos_emb, per tensor
    got = rotate(x, *rotary(cos, sin))
    assert torch.equal(got, want)
    upstream = torch.randn(x_shape, generator=generator)
    (want_grad,) = torch.autograd.grad(want, x, upstream)
    (got_grad,) = torch.autograd.grad(got, x, upstream)
    assert torch.equal(got_grad, want_grad)
    if x.dim() == 4:  # the prefill rotates a transposed view
        view = x.detach().transpose(1, 2).contiguous().transpose(1, 2)
        assert torch.equal(rotate(view, *rotary(cos, sin)), view * cos + rotate_half(view) * sin)
