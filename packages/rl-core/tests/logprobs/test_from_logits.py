"""Chunked log-probs and entropy from logits equal the naive full log-softmax, in value and gradient."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError
from rl_core.logprobs import entropy_from_logits, log_probs_and_entropy_from_logits, log_probs_from_logits

# Chunked and naive differ only in summation order over the vocabulary.
TOLERANCE = 1e-5
# bf16 logits are upcast exactly, so values still meet TOLERANCE against the float32 naive reference;
# their gradient is rounded to bf16 (8 mantissa bits), so it is compared at bf16 resolution.
BF16_GRAD_TOLERANCE = 1e-2

NaiveStats = Callable[[torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, torch.Tensor]]


def _inputs(shape: tuple[int, ...], vocab: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = (3.0 * torch.randn(*shape, vocab, generator=generator, dtype=torch.float64)).to(dtype)
    labels = torch.randint(0, vocab, shape, generator=generator)
    return logits, labels


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(
    ("shape", "chunk_size"),
    [((4, 9), 5), ((37,), 4), ((3, 5), 64), ((2, 3, 4), 1), ((7,), 7)],
    ids=["chunk-not-dividing", "flat-odd", "rows-below-chunk", "3d-chunk-1", "chunk-equals-rows"],
)
def test_values_match_naive(
    naive_stats: NaiveStats, dtype: torch.dtype, shape: tuple[int, ...], chunk_size: int
) -> None:
    logits, labels = _inputs(shape, 13, dtype)
    log_probs, entropy = log_probs_and_entropy_from_logits(logits, labels, temperature=0.8, chunk_size=chunk_size)
    upcast = logits.to(torch.promote_types(dtype, torch.float32))
    expected_log_probs, expected_entropy = naive_stats(upcast, labels, 0.8)
    assert log_probs.shape == shape and entropy.shape == shape
    assert log_probs.dtype == upcast.dtype and entropy.dtype == upcast.dtype
    torch.testing.assert_close(log_probs, expected_log_probs, atol=TOLERANCE, rtol=TOLERANCE)
    torch.testing.assert_close(entropy, expected_entropy, atol=TOLERANCE, rtol=TOLERANCE)
    torch.testing.assert_close(log_probs_from_logits(logits, labels, temperature=0.8, chunk_size=chunk_size), log_probs)
    torch.testing.assert_close(entropy_from_logits(logits, temperature=0.8, chunk_size=chunk_size), entropy)


def test_values_match_a_plain_loop_at_several_temperatures() -> None:
    logits, labels = _inputs((5,), 4, torch.float64)
    for temperature in (0.5, 1.0, 3.0):
        log_probs, entropy = log_probs_and_entropy_from_logits(logits, labels, temperature=temperature, chunk_size=2)
        for row in range(5):
            scaled = [value / temperature for value in logits[row].tolist()]
            total = sum(math.exp(v) for v in scaled)
            probs = [math.exp(v) / total for v in scaled]
            assert log_probs[row].item() == pytest.approx(math.log(probs[int(labels[row])]))
            assert entropy[row].item() == pytest.approx(-sum(p * math.log(p) for p in probs))


def test_non_contiguous_logits_match_naive(naive_stats: NaiveStats) -> None:
    logits, labels = _inputs((3, 6), 11, torch.float32)
    shifted, shifted_labels = logits[:, :-1], labels[:, 1:]
    log_probs, entropy = log_probs_and_entropy_from_logits(shifted, shifted_labels, chunk_size=4)
    expected_log_probs, expected_entropy = naive_stats(shifted, shifted_labels, 1.0)
    torch.testing.assert_close(log_probs, expected_log_probs, atol=TOLERANCE, rtol=TOLERANCE)
    torch.testing.assert_close(entropy, expected_entropy, atol=TOLERANCE, rtol=TOLERANCE)


def test_empty_batch_gives_empty_outputs() -> None:
    log_probs, entropy = log_probs_and_entropy_from_logits(torch.zeros(0, 5), torch.zeros(0, dtype=torch.int64))
    assert log_probs.shape == (0,) and entropy.shape == (0,)


def _gradients(
    logits: torch.Tensor, labels: torch.Tensor, used: str, *, chunked: bool, naive_stats: NaiveStats
) -> torch.Tensor:
    """Gradient wrt logits of random weighted sums of the outputs named by `used`."""
    leaf = logits.detach().requires_grad_(True)
    if chunked:
        log_probs, entropy = log_probs_and_entropy_from_logits(leaf, labels, temperature=1.7, chunk_size=3)
    else:
        log_probs, entropy = naive_stats(leaf.to(torch.promote_types(leaf.dtype, torch.float32)), labels, 1.7)
    generator = torch.Generator().manual_seed(1)
    weights = torch.randn(2, *labels.shape, generator=generator, dtype=log_probs.dtype)
    terms = {"log_probs": (log_probs * weights[0]).sum(), "entropy": (entropy * weights[1]).sum()}
    loss = sum(terms.values()) if used == "both" else terms[used]
    (grad,) = torch.autograd.grad(loss, leaf)
    return grad


@pytest.mark.parametrize("used", ["both", "log_probs", "entropy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_gradients_match_naive_autograd(naive_stats: NaiveStats, dtype: torch.dtype, used: str) -> None:
    logits, labels = _inputs((2, 5), 9, dtype)
    got = _gradients(logits, labels, used, chunked=True, naive_stats=naive_stats)
    expected = _gradients(logits, labels, used, chunked=False, naive_stats=naive_stats)
    assert got.dtype == dtype
    tolerance = BF16_GRAD_TOLERANCE if dtype == torch.bfloat16 else TOLERANCE
    torch.testing.assert_close(got, expected, atol=tolerance, rtol=tolerance)


def test_single_output_functions_match_naive_gradients(naive_stats: NaiveStats) -> None:
    logits, labels = _inputs((7,), 6, torch.float64)
    leaf = logits.clone().requires_grad_(True)
    (grad_log_probs,) = torch.autograd.grad(log_probs_from_logits(leaf, labels, chunk_size=2).sum(), leaf)
    (grad_entropy,) = torch.autograd.grad(entropy_from_logits(leaf, chunk_size=2).sum(), leaf)
    (expected_log_probs,) = torch.autograd.grad(naive_stats(leaf, labels, 1.0)[0].sum(), leaf)
    (expected_entropy,) = torch.autograd.grad(naive_stats(leaf, labels, 1.0)[1].sum(), leaf)
    torch.testing.assert_close(grad_log_probs, expected_log_probs)
    torch.testing.assert_close(grad_entropy, expected_entropy)


def test_gradcheck_float64() -> None:
    logits, labels = _inputs((5,), 4, torch.float64)
    leaf = logits.requires_grad_(True)

    def both(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return log_probs_and_entropy_from_logits(x, labels, temperature=1.3, chunk_size=2)

    assert torch.autograd.gradcheck(both, (leaf,))
    assert torch.autograd.gradcheck(lambda x: log_probs_from_logits(x, labels, chunk_size=3), (leaf,))
    assert torch.autograd.gradcheck(lambda x: entropy_from_logits(x, temperature=0.6, chunk_size=4), (leaf,))


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 20),
    vocab=st.integers(1, 12),
    chunk_size=st.integers(1, 25),
    temperature=st.floats(0.25, 4.0),
    seed=st.integers(0, 2**16),
)
def test_property_any_chunking_matches_naive(
    rows: int, vocab: int, chunk_size: int, temperature: float, seed: int
) -> None:
    logits, labels = _inputs((rows,), vocab, torch.float64, seed)
    leaf = logits.requires_grad_(True)
    log_probs, entropy = log_probs_and_entropy_from_logits(leaf, labels, temperature=temperature, chunk_size=chunk_size)
    log_p = torch.log_softmax(leaf / temperature, dim=-1)
    expected_log_probs = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    expected_entropy = -(log_p.exp() * log_p).sum(-1)
    torch.testing.assert_close(log_probs, expected_log_probs)
    torch.testing.assert_close(entropy, expected_entropy)
    got = torch.autograd.grad((log_probs - 0.3 * entropy).sum(), leaf)
    expected = torch.autograd.grad((expected_log_probs - 0.3 * expected_entropy).sum(), leaf)
    torch.testing.assert_close(got, expected)


def test_never_allocates_more_than_the_gradient_at_full_size(new_buffer_sizes: type) -> None:
    # Every buffer created in forward is at most chunk-sized; backward adds exactly one (N, V): the gradient.
    rows, vocab, chunk = 40, 30, 8
    logits, labels = _inputs((rows,), vocab, torch.float32)
    leaf = logits.requires_grad_(True)
    with new_buffer_sizes() as forward:
        log_probs, entropy = log_probs_and_entropy_from_logits(leaf, labels, chunk_size=chunk)
    with new_buffer_sizes() as backward:
        (log_probs + entropy).sum().backward()
    assert max(forward.sizes) <= chunk * vocab
    assert sorted(backward.sizes)[-2] <= chunk * vocab
    assert max(backward.sizes) == rows * vocab


LOGITS, LABELS = _inputs((2, 3), 5, torch.float32)


@pytest.mark.parametrize(
    ("logits", "labels", "error", "match"),
    [
        ([[0.0, 1.0]], LABELS, ShapeError, r"logits must be a tensor of shape \(\.\.\., V\).*got list"),
        (torch.tensor(1.0), LABELS, ShapeError, r"logits must be a tensor of shape \(\.\.\., V\).*got \(\)"),
        (LOGITS.long(), LABELS, ShapeError, "logits must have a floating dtype, got torch.int64"),
        (torch.zeros(2, 3, 0), LABELS, ShapeError, r"non-empty vocabulary .* got shape \(2, 3, 0\)"),
        (LOGITS, LABELS[:, :2], ShapeError, r"labels must have shape \(2, 3\) .*got \(2, 2\)"),
        (LOGITS, LABELS[0], ShapeError, r"labels must have shape \(2, 3\), got \(3,\)"),
        (LOGITS, LABELS.float(), ShapeError, "labels must have an integer dtype .*got torch.float32"),
        (LOGITS, LABELS.bool(), ShapeError, "labels must have an integer dtype .*got torch.bool"),
        (LOGITS, LABELS - 1 - LABELS.max(), ValueError, r"labels must lie in \[0, V\) = \[0, 5\).*got values in \[-"),
        (LOGITS, LABELS + 5, ValueError, r"labels must lie in \[0, V\) = \[0, 5\) \(V is logits' last dim\)"),
        (LOGITS, LABELS.to("meta"), ShapeError, "tensors must share one device"),
    ],
)
def test_rejects_bad_tensors(logits: object, labels: torch.Tensor, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        log_probs_and_entropy_from_logits(logits, labels)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("keyword", "value", "match"),
    [
        ("temperature", 0.0, "temperature must be > 0, got 0.0"),
        ("temperature", -1.0, "temperature must be > 0, got -1.0"),
        ("temperature", math.nan, "temperature must be a finite number > 0, got nan"),
        ("temperature", math.inf, "temperature must be a finite number > 0, got inf"),
        ("temperature", True, "temperature must be a finite number > 0, got True"),
        ("temperature", "1", "temperature must be a finite number > 0, got '1'"),
        ("chunk_size", 0, "chunk_size must be > 0, got 0"),
        ("chunk_size", -4, "chunk_size must be > 0, got -4"),
        ("chunk_size", 2.5, r"chunk_size must be an int > 0 \(rows per chunk\), got 2.5"),
        ("chunk_size", True, r"chunk_size must be an int > 0 \(rows per chunk\), got True"),
    ],
)
def test_rejects_bad_scalars(keyword: str, value: object, match: str) -> None:
    for call in (
        lambda: log_probs_from_logits(LOGITS, LABELS, **{keyword: value}),  # type: ignore[arg-type]
        lambda: entropy_from_logits(LOGITS, **{keyword: value}),  # type: ignore[arg-type]
        lambda: log_probs_and_entropy_from_logits(LOGITS, LABELS, **{keyword: value}),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match=match):
            call()
