"""Log-probs and entropy from hidden states equal the naive `hidden @ weight.T` path, in value and gradient."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError
from rl_core.logprobs import log_probs_and_entropy_from_hidden, log_probs_and_entropy_from_logits

# Chunked and naive differ only in summation order over the vocabulary.
TOLERANCE = 1e-5
# bf16 inputs: values are compared at TOLERANCE against the naive path on the same bf16 logits (each row's
# logits come from the same bf16 matmul either way); gradients are bf16 results of bf16 matmuls, compared
# at bf16 resolution (8 mantissa bits, summed over a few dozen rows).
BF16_GRAD_TOLERANCE = 2e-2

NaiveStats = Callable[[torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, torch.Tensor]]
Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _inputs(lead: tuple[int, ...], width: int, vocab: int, dtype: torch.dtype, seed: int = 0) -> Inputs:
    """`hidden (*lead, H)`, `weight (V, H)`, `bias (V,)`, `labels lead` with logits of order 1."""
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    hidden = draw(*lead, width).to(dtype)
    weight = (draw(vocab, width) / math.sqrt(width)).to(dtype)
    bias = draw(vocab).to(dtype)
    labels = torch.randint(0, vocab, lead, generator=generator)
    return hidden, weight, bias, labels


def _naive(
    naive_stats: NaiveStats, inputs: Inputs, temperature: float, with_bias: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    hidden, weight, bias, labels = inputs
    logits = F.linear(hidden, weight, bias if with_bias else None)
    return naive_stats(logits.to(torch.promote_types(logits.dtype, torch.float32)), labels, temperature)


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(
    ("lead", "chunk_size"),
    [((37,), 5), ((3, 7), 4), ((6,), 64), ((2, 5), 1)],
    ids=["chunk-not-dividing", "batch-time", "rows-below-chunk", "chunk-1"],
)
def test_values_match_naive(
    naive_stats: NaiveStats, dtype: torch.dtype, with_bias: bool, lead: tuple[int, ...], chunk_size: int
) -> None:
    inputs = _inputs(lead, 16, 29, dtype)
    hidden, weight, bias, labels = inputs
    log_probs, entropy = log_probs_and_entropy_from_hidden(
        hidden, weight, labels, bias=bias if with_bias else None, temperature=0.7, chunk_size=chunk_size
    )
    expected_log_probs, expected_entropy = _naive(naive_stats, inputs, 0.7, with_bias)
    assert log_probs.shape == lead and entropy.shape == lead
    assert log_probs.dtype == expected_log_probs.dtype
    torch.testing.assert_close(log_probs, expected_log_probs, atol=TOLERANCE, rtol=TOLERANCE)
    torch.testing.assert_close(entropy, expected_entropy, atol=TOLERANCE, rtol=TOLERANCE)


def test_equals_the_logits_path_on_the_projected_logits() -> None:
    hidden, weight, bias, labels = _inputs((4, 6), 8, 11, torch.float64)
    got = log_probs_and_entropy_from_hidden(hidden, weight, labels, bias=bias, temperature=1.5, chunk_size=5)
    expected = log_probs_and_entropy_from_logits(hidden @ weight.T + bias, labels, temperature=1.5, chunk_size=5)
    torch.testing.assert_close(got, expected)


def test_empty_batch_gives_empty_outputs_and_zero_weight_gradient() -> None:
    weight = torch.randn(5, 3, requires_grad=True)
    log_probs, entropy = log_probs_and_entropy_from_hidden(torch.zeros(0, 3), weight, torch.zeros(0, dtype=torch.int64))
    assert log_probs.shape == entropy.shape == (0,)
    (grad,) = torch.autograd.grad((log_probs + entropy).sum(), weight)
    assert torch.equal(grad, torch.zeros(5, 3))


def test_hand_values() -> None:
    # H = 1, weight column log(1), log(2), log(3): p = (1/6, 2/6, 3/6) for hidden 1, bias 0.
    weight = torch.tensor([[math.log(1.0)], [math.log(2.0)], [math.log(3.0)]], dtype=torch.float64)
    log_probs, entropy = log_probs_and_entropy_from_hidden(
        torch.ones(2, 1, dtype=torch.float64), weight, torch.tensor([1, 2])
    )
    assert log_probs.tolist() == pytest.approx([math.log(2 / 6), math.log(3 / 6)])
    assert entropy.tolist() == pytest.approx([-sum(p * math.log(p) for p in (1 / 6, 2 / 6, 3 / 6))] * 2)


def _gradients(
    inputs: Inputs, used: str, *, chunked: bool, naive_stats: NaiveStats
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients wrt hidden, weight and bias of random weighted sums of the outputs named by `used`."""
    hidden, weight, bias, labels = (t.detach().requires_grad_(t.is_floating_point()) for t in inputs)
    if chunked:
        log_probs, entropy = log_probs_and_entropy_from_hidden(
            hidden, weight, labels, bias=bias, temperature=1.3, chunk_size=4
        )
    else:
        log_probs, entropy = _naive(naive_stats, (hidden, weight, bias, labels), 1.3, True)
    generator = torch.Generator().manual_seed(1)
    weights = torch.randn(2, *labels.shape, generator=generator, dtype=log_probs.dtype)
    terms = {"log_probs": (log_probs * weights[0]).sum(), "entropy": (entropy * weights[1]).sum()}
    loss = sum(terms.values()) if used == "both" else terms[used]
    grad_hidden, grad_weight, grad_bias = torch.autograd.grad(loss, (hidden, weight, bias))
    return grad_hidden, grad_weight, grad_bias


@pytest.mark.parametrize("used", ["both", "log_probs", "entropy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_gradients_match_naive_autograd(naive_stats: NaiveStats, dtype: torch.dtype, used: str) -> None:
    inputs = _inputs((2, 9), 6, 13, dtype)
    got = _gradients(inputs, used, chunked=True, naive_stats=naive_stats)
    expected = _gradients(inputs, used, chunked=False, naive_stats=naive_stats)
    tolerance = BF16_GRAD_TOLERANCE if dtype == torch.bfloat16 else TOLERANCE
    for name, grad, reference in zip(("hidden", "weight", "bias"), got, expected, strict=True):
        assert grad.dtype == dtype, name
        torch.testing.assert_close(grad, reference, atol=tolerance, rtol=tolerance, msg=lambda m, n=name: f"{n}: {m}")


def test_only_the_inputs_that_require_grad_get_one() -> None:
    hidden, weight, _, labels = _inputs((5,), 3, 7, torch.float64)
    weight.requires_grad_(True)
    log_probs, entropy = log_probs_and_entropy_from_hidden(hidden, weight, labels, chunk_size=2)
    (grad_weight,) = torch.autograd.grad((log_probs + entropy).sum(), weight)
    expected_logits = (hidden @ weight.detach().T).requires_grad_(True)
    log_p = torch.log_softmax(expected_logits, dim=-1)
    loss = (log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1) - (log_p.exp() * log_p).sum(-1)).sum()
    (grad_logits,) = torch.autograd.grad(loss, expected_logits)
    torch.testing.assert_close(grad_weight, grad_logits.T @ hidden)
    assert hidden.grad is None


@pytest.mark.parametrize("with_bias", [True, False])
def test_gradcheck_float64(with_bias: bool) -> None:
    hidden, weight, bias, labels = (
        t.requires_grad_(t.is_floating_point()) for t in _inputs((2, 3), 3, 4, torch.float64)
    )

    def both(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return log_probs_and_entropy_from_hidden(
            h, w, labels, bias=b if with_bias else None, temperature=0.9, chunk_size=4
        )

    assert torch.autograd.gradcheck(both, (hidden, weight, bias))


@settings(max_examples=50, deadline=None)
@given(
    rows=st.integers(1, 16),
    width=st.integers(1, 6),
    vocab=st.integers(1, 10),
    chunk_size=st.integers(1, 20),
    temperature=st.floats(0.25, 4.0),
    with_bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_any_chunking_matches_naive(
    rows: int, width: int, vocab: int, chunk_size: int, temperature: float, with_bias: bool, seed: int
) -> None:
    hidden, weight, bias, labels = (
        t.requires_grad_(t.is_floating_point()) for t in _inputs((rows,), width, vocab, torch.float64, seed)
    )
    used_bias = bias if with_bias else None
    log_probs, entropy = log_probs_and_entropy_from_hidden(
        hidden, weight, labels, bias=used_bias, temperature=temperature, chunk_size=chunk_size
    )
    log_p = torch.log_softmax(F.linear(hidden, weight, used_bias) / temperature, dim=-1)
    expected_log_probs = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    expected_entropy = -(log_p.exp() * log_p).sum(-1)
    torch.testing.assert_close(log_probs, expected_log_probs)
    torch.testing.assert_close(entropy, expected_entropy)
    leaves = (hidden, weight, bias) if with_bias else (hidden, weight)
    got = torch.autograd.grad((2.0 * log_probs + entropy).sum(), leaves)
    expected = torch.autograd.grad((2.0 * expected_log_probs + expected_entropy).sum(), leaves)
    torch.testing.assert_close(got, expected)


def test_never_allocates_logits_at_full_size(new_buffer_sizes: type) -> None:
    rows, width, vocab, chunk = 64, 4, 40, 8
    hidden, weight, bias, labels = (
        t.requires_grad_(t.is_floating_point()) for t in _inputs((rows,), width, vocab, torch.float32)
    )
    with new_buffer_sizes() as seen:
        log_probs, entropy = log_probs_and_entropy_from_hidden(hidden, weight, labels, bias=bias, chunk_size=chunk)
        (log_probs + entropy).sum().backward()
    # The largest buffers are one chunk of logits and the (N, H) / (V, H) gradients, never (N, V).
    assert max(seen.sizes) == max(chunk * vocab, rows * width, vocab * width) < rows * vocab


HIDDEN, WEIGHT, BIAS, LABELS = _inputs((2, 3), 4, 5, torch.float32)


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"hidden": HIDDEN[0, 0]}, ShapeError, r"hidden must have shape \(N, H\) or \(B, T, H\), got \(4,\)"),
        ({"hidden": HIDDEN[None]}, ShapeError, r"hidden must have shape \(N, H\) or \(B, T, H\), got \(1, 2, 3, 4\)"),
        ({"hidden": [[1.0]]}, ShapeError, r"hidden must be a torch.Tensor of shape \(N, H\), got list"),
        ({"hidden": HIDDEN.long()}, ShapeError, "hidden must have a floating dtype, got torch.int64"),
        ({"weight": WEIGHT[:, :3]}, ShapeError, r"weight must have shape \(V, H\) with H=4 .*got \(5, 3\)"),
        ({"weight": WEIGHT.double()}, ShapeError, "weight must have dtype torch.float32, got torch.float64"),
        ({"weight": WEIGHT[:0]}, ShapeError, r"non-empty vocabulary .* got shape \(0, 4\)"),
        ({"bias": BIAS[:4]}, ShapeError, r"bias must have shape \(V\) with V=5 .*got \(4,\)"),
        ({"bias": BIAS.bfloat16()}, ShapeError, "bias must have dtype torch.float32, got torch.bfloat16"),
        ({"labels": LABELS[:, :2]}, ShapeError, r"labels must have shape \(B, T\) with T=3 .*got \(2, 2\)"),
        ({"labels": LABELS.reshape(-1)}, ShapeError, r"labels must have shape \(B, T\), got \(6,\)"),
        ({"labels": LABELS.double()}, ShapeError, "labels must have an integer dtype .*got torch.float64"),
        ({"labels": LABELS + 5}, ValueError, r"labels must lie in \[0, V\) = \[0, 5\) \(V is weight's first dim\)"),
        ({"labels": LABELS - 5}, ValueError, r"labels must lie in \[0, V\) = \[0, 5\).*got values in \[-5, "),
        ({"weight": WEIGHT.to("meta")}, ShapeError, "tensors must share one device, got hidden on cpu, weight on meta"),
        ({"temperature": 0.0}, ValueError, "temperature must be > 0, got 0.0"),
        ({"temperature": math.nan}, ValueError, "temperature must be a finite number > 0, got nan"),
        ({"chunk_size": 0}, ValueError, "chunk_size must be > 0, got 0"),
        ({"chunk_size": 1.5}, ValueError, r"chunk_size must be an int > 0 \(rows per chunk\), got 1.5"),
    ],
)
def test_rejects_bad_arguments(arguments: dict[str, object], error: type[Exception], match: str) -> None:
    call = {"hidden": HIDDEN, "weight": WEIGHT, "labels": LABELS, "bias": BIAS, **arguments}
    with pytest.raises(error, match=match):
        log_probs_and_entropy_from_hidden(**call)  # type: ignore[arg-type]
