"""The chunked log-prob functions give the same values and gradients on a CUDA device as on the CPU."""

from __future__ import annotations

import pytest
import torch

from rl_core.logprobs import log_probs_and_entropy_from_hidden, log_probs_and_entropy_from_logits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

# CUDA and CPU kernels reduce in different orders.
TOLERANCE = 1e-5


def test_logits_path_cuda_matches_cpu() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(37, 50, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 50, (37,), generator=generator)
    results = []
    for device in ("cpu", "cuda"):
        leaf = logits.to(device).requires_grad_(True)
        log_probs, entropy = log_probs_and_entropy_from_logits(leaf, labels.to(device), temperature=0.7, chunk_size=8)
        (grad,) = torch.autograd.grad((log_probs - 0.5 * entropy).sum(), leaf)
        results.append(tuple(t.cpu() for t in (log_probs, entropy, grad)))
    torch.testing.assert_close(results[1], results[0], atol=TOLERANCE, rtol=TOLERANCE)


def test_hidden_path_cuda_matches_cpu() -> None:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=generator, dtype=torch.float64)
    weight = torch.randn(50, 16, generator=generator, dtype=torch.float64) / 4.0
    bias = torch.randn(50, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 50, (37,), generator=generator)
    results = []
    for device in ("cpu", "cuda"):
        leaves = [t.to(device).requires_grad_(True) for t in (hidden, weight, bias)]
        log_probs, entropy = log_probs_and_entropy_from_hidden(
            leaves[0], leaves[1], labels.to(device), bias=leaves[2], temperature=1.3, chunk_size=8
        )
        grads = torch.autograd.grad((log_probs + entropy).sum(), leaves)
        results.append(tuple(t.cpu() for t in (log_probs, entropy, *grads)))
    torch.testing.assert_close(results[1], results[0], atol=TOLERANCE, rtol=TOLERANCE)


def test_hidden_path_bf16_cuda_gradients_stay_near_float64() -> None:
    """bf16 inputs on CUDA (the weight gradient's GEMM on tensor cores with a float32 output) give gradients within
    bf16 rounding of a float64 CPU reference."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(300, 64, generator=generator, dtype=torch.float64)
    weight = torch.randn(500, 64, generator=generator, dtype=torch.float64) / 8.0
    labels = torch.randint(0, 500, (300,), generator=generator)
    results = []
    for device, dtype in (("cpu", torch.float64), ("cuda", torch.bfloat16)):
        leaves = [t.to(device, dtype).requires_grad_(True) for t in (hidden, weight)]
        log_probs, entropy = log_probs_and_entropy_from_hidden(leaves[0], leaves[1], labels.to(device), chunk_size=64)
        grads = torch.autograd.grad((log_probs + entropy).sum(), leaves)
        results.append([t.double().cpu() for t in (log_probs, *grads)])
    for got, want in zip(results[1], results[0], strict=True):
        assert (got - want).norm() / want.norm() < 2e-2
