"""KL estimators: hand-worked values, sign and zero properties, straight-through gradients, exact expectations."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError
from rl_core.kl import KL_ESTIMATORS, abs_kl, abs_plus, k1, k1_plus, k2, k2_plus, k3, k3_plus

DTYPE = torch.float64
E = math.e

# log π = [-1, -2, -0.5], log π_ref = [-2, -1, -0.5]: δ = log π - log π_ref = [1, -1, 0], log r = -δ = [-1, 1, 0].
LOG_PROBS = [[-1.0, -2.0, -0.5]]
REF_LOG_PROBS = [[-2.0, -1.0, -0.5]]

BY_HAND = {
    k1: [1.0, -1.0, 0.0],
    abs_kl: [1.0, 1.0, 0.0],
    k2: [0.5, 0.5, 0.0],
    # r - 1 - log r: e^-1 - 1 + 1 = 1/e; e - 1 - 1 = e - 2; 1 - 1 - 0 = 0.
    k3: [1 / E, E - 2, 0.0],
}
PLUS = {k1_plus: k1, abs_plus: abs_kl, k2_plus: k2, k3_plus: k3}
NON_NEGATIVE = [abs_kl, k2, k3, abs_plus, k2_plus, k3_plus]


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(LOG_PROBS, dtype=DTYPE), torch.tensor(REF_LOG_PROBS, dtype=DTYPE)


def _grads(fn, log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    log_probs = log_probs.clone().requires_grad_(True)
    ref_log_probs = ref_log_probs.clone().requires_grad_(True)
    fn(log_probs, ref_log_probs).sum().backward()
    return log_probs.grad, ref_log_probs.grad


@pytest.mark.parametrize("fn", list(BY_HAND), ids=lambda f: f.__name__)
def test_values_by_hand(fn) -> None:
    assert fn(*_pair())[0].tolist() == pytest.approx(BY_HAND[fn], abs=1e-15)


@pytest.mark.parametrize("plus", list(PLUS), ids=lambda f: f.__name__)
def test_plus_forms_by_hand(plus) -> None:
    assert torch.equal(plus(*_pair()), PLUS[plus](*_pair()))
    grad, ref_grad = _grads(plus, *_pair())
    # d/d log π of δ²/2 is δ = [1, -1, 0]; d/d log π_ref is -δ.
    assert grad[0].tolist() == [1.0, -1.0, 0.0]
    assert ref_grad[0].tolist() == [-1.0, 1.0, 0.0]


def test_base_gradients_by_hand() -> None:
    assert _grads(k1, *_pair())[0][0].tolist() == [1.0, 1.0, 1.0]
    assert _grads(abs_kl, *_pair())[0][0].tolist() == [1.0, -1.0, 0.0]
    assert _grads(k2, *_pair())[0][0].tolist() == [1.0, -1.0, 0.0]
    # d/d log π of r - 1 - log r with r = exp(-δ) is 1 - r: 1 - 1/e, 1 - e, 0.
    assert _grads(k3, *_pair())[0][0].tolist() == pytest.approx([1 - 1 / E, 1 - E, 0.0], abs=1e-15)


def test_k3_caps_and_their_zero_gradient() -> None:
    # δ = 3: r - 1 - log r = e^-3 + 2 (uncapped). δ = 15: e^-15 + 14 > 10, capped. δ = -30: log r clamps at 20,
    # then e^20 - 21 > 10, capped. A capped token passes no gradient.
    log_probs = torch.tensor([[0.0, 0.0, -30.0]], dtype=DTYPE)
    ref_log_probs = torch.tensor([[-3.0, -15.0, 0.0]], dtype=DTYPE)
    assert k3(log_probs, ref_log_probs)[0].tolist() == pytest.approx([math.exp(-3) + 2, 10.0, 10.0], abs=1e-15)
    grad = _grads(k3, log_probs, ref_log_probs)[0][0].tolist()
    assert grad == pytest.approx([1 - math.exp(-3), 0.0, 0.0], abs=1e-15)
    # The + form keeps the capped value but still carries δ as gradient.
    assert _grads(k3_plus, log_probs, ref_log_probs)[0][0].tolist() == [3.0, 15.0, -30.0]


def test_k3_is_accurate_when_the_policies_nearly_agree() -> None:
    # δ = 1e-4 in float32: r - 1 - log r ≈ δ²/2 - δ³/6 ≈ 5e-9, far below float32's epsilon around 1.
    delta = 1e-4
    exact = math.expm1(-delta) + delta
    value = k3(torch.tensor([[delta]]), torch.zeros(1, 1)).item()
    assert value == pytest.approx(exact, rel=1e-3)


# Hypothesis: small (B, T) pairs of log-probs, in float32 or float64.
_SHAPES = st.tuples(st.integers(1, 4), st.integers(1, 5))
_LOG_PROB = st.floats(min_value=-25.0, max_value=0.0, allow_nan=False)


@st.composite
def _log_prob_pairs(draw, *, near: bool = False):
    rows, cols = draw(_SHAPES)
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    n = rows * cols
    first = draw(st.lists(_LOG_PROB, min_size=n, max_size=n))
    if near:
        offsets = draw(st.lists(st.floats(min_value=-1e-3, max_value=1e-3), min_size=n, max_size=n))
        second = [a + b for a, b in zip(first, offsets, strict=True)]
    else:
        second = draw(st.lists(_LOG_PROB, min_size=n, max_size=n))
    return (
        torch.tensor(first, dtype=dtype).reshape(rows, cols),
        torch.tensor(second, dtype=dtype).reshape(rows, cols),
    )


@settings(max_examples=80, deadline=None)
@given(st.one_of(_log_prob_pairs(), _log_prob_pairs(near=True)))
def test_non_negative_estimators_are_never_negative(pair) -> None:
    for fn in NON_NEGATIVE:
        assert bool((fn(*pair) >= 0).all()), fn.__name__


@settings(max_examples=60, deadline=None)
@given(_log_prob_pairs())
def test_every_estimator_is_zero_where_the_policies_agree(pair) -> None:
    log_probs, _ = pair
    for name, fn in KL_ESTIMATORS.items():
        assert bool((fn(log_probs, log_probs.clone()) == 0).all()), name


@settings(max_examples=60, deadline=None)
@given(_log_prob_pairs())
def test_plus_forms_have_the_base_value_and_the_k2_gradient(pair) -> None:
    log_probs, ref_log_probs = pair
    for plus, base in PLUS.items():
        assert torch.equal(plus(log_probs, ref_log_probs), base(log_probs, ref_log_probs)), plus.__name__
        grad, ref_grad = _grads(plus, log_probs, ref_log_probs)
        for b in range(log_probs.shape[0]):
            for t in range(log_probs.shape[1]):
                delta = log_probs[b, t].item() - ref_log_probs[b, t].item()
                assert grad[b, t].item() == pytest.approx(delta, rel=1e-6, abs=1e-6)
                assert ref_grad[b, t].item() == pytest.approx(-delta, rel=1e-6, abs=1e-6)


# Exact expectations over a small categorical distribution: logits within ±0.6 keep |log r| < 2.4, below k3's cap.
_LOGITS = st.integers(2, 6).flatmap(
    lambda k: st.tuples(*[st.lists(st.floats(-0.6, 0.6), min_size=k, max_size=k) for _ in range(2)])
)


def _log_softmax(logits: list[float]) -> list[float]:
    total = math.log(sum(math.exp(x) for x in logits))
    return [x - total for x in logits]


def _kl(log_p: list[float], log_q: list[float]) -> float:
    return sum(math.exp(a) * (a - b) for a, b in zip(log_p, log_q, strict=True))


@settings(max_examples=80, deadline=None)
@given(_LOGITS)
def test_k1_and_k3_are_unbiased_under_exact_enumeration(logits) -> None:
    log_p, log_q = _log_softmax(logits[0]), _log_softmax(logits[1])
    exact = _kl(log_p, log_q)
    for fn in (k1, k3, k1_plus, k3_plus):
        estimates = fn(torch.tensor([log_p], dtype=DTYPE), torch.tensor([log_q], dtype=DTYPE))[0].tolist()
        expected = sum(math.exp(a) * e for a, e in zip(log_p, estimates, strict=True))
        assert expected == pytest.approx(exact, abs=1e-12), fn.__name__


def _expected_gradient(fn, theta: list[float], log_q: list[float]) -> list[float]:
    """∇_θ of E_{a~π_θ}[fn(log π_θ(a), log q(a))] holding the sampling distribution fixed (a loss's gradient)."""
    logits = torch.tensor(theta, dtype=DTYPE, requires_grad=True)
    log_p = torch.log_softmax(logits, dim=0)
    per_token = fn(log_p.unsqueeze(0), torch.tensor([log_q], dtype=DTYPE))[0]
    (log_p.detach().exp() * per_token).sum().backward()
    return logits.grad.tolist()


def _divergence_gradient(theta: list[float], log_q: list[float], *, reverse: bool) -> list[float]:
    logits = torch.tensor(theta, dtype=DTYPE, requires_grad=True)
    log_p = torch.log_softmax(logits, dim=0)
    q = torch.tensor(log_q, dtype=DTYPE)
    divergence = (q.exp() * (q - log_p)).sum() if reverse else (log_p.exp() * (log_p - q)).sum()
    divergence.backward()
    return logits.grad.tolist()


@settings(max_examples=60, deadline=None)
@given(_LOGITS)
def test_expected_gradients_follow_the_documented_divergence(logits) -> None:
    theta, log_q = logits[0], _log_softmax(logits[1])
    forward = _divergence_gradient(theta, log_q, reverse=False)
    for fn in (k2, k1_plus, abs_plus, k2_plus, k3_plus):
        assert _expected_gradient(fn, theta, log_q) == pytest.approx(forward, abs=1e-12), fn.__name__
    assert _expected_gradient(k1, theta, log_q) == pytest.approx([0.0] * len(theta), abs=1e-12)
    reverse = _divergence_gradient(theta, log_q, reverse=True)
    assert _expected_gradient(k3, theta, log_q) == pytest.approx(reverse, abs=1e-12)


@pytest.mark.parametrize("name", sorted(KL_ESTIMATORS))
def test_rejects_a_non_tensor(name: str) -> None:
    with pytest.raises(ShapeError, match=r"log_probs must be a torch.Tensor of shape \(B, T\), got list"):
        KL_ESTIMATORS[name]([[0.0]], torch.zeros(1, 1))


@pytest.mark.parametrize("name", sorted(KL_ESTIMATORS))
def test_rejects_mismatched_shapes(name: str) -> None:
    with pytest.raises(ShapeError, match=r"ref_log_probs must have shape \(B, T\) with T=3 .*got \(1, 2\)"):
        KL_ESTIMATORS[name](torch.zeros(1, 3), torch.zeros(1, 2))


def test_rejects_a_flat_tensor() -> None:
    with pytest.raises(ShapeError, match=r"log_probs must have shape \(B, T\), got \(3,\)"):
        k3(torch.zeros(3), torch.zeros(3))


def test_rejects_integer_log_probs() -> None:
    with pytest.raises(ShapeError, match=r"ref_log_probs must have a floating dtype, got torch\.int64"):
        k1(torch.zeros(1, 3), torch.zeros(1, 3, dtype=torch.int64))
