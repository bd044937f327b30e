"""Properties every registered policy loss keeps: blind to masked tokens, closed forms at the old policy,
the REINFORCE gradient there, and micro-batch additivity under the global normaliser."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.losses import AGGREGATIONS, POLICY_LOSSES, LossNormalizer, PolicyLossInputs

from ._batches import random_inputs

_JUNK = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e30, -7.0])

# Closed form at log_probs == old_log_probs, per token, from (advantage, log_prob); written out plainly.
CLOSED_FORMS = {
    "ppo": lambda a, lp: -a,
    "decoupled_ppo": lambda a, lp: -a,  # with the behaviour policy equal to the old one: weight 1
    "gspo": lambda a, lp: -a,
    "kl_cov": lambda a, lp: -a,
    "clip_cov": lambda a, lp: -a,  # with bounds no covariance reaches (see _params)
    "cispo": lambda a, lp: -a * lp,
    "gpg": lambda a, lp: -a * lp,
    "sapo": lambda a, lp: -a * 2.0 / (1.0 if a > 0 else 1.05),  # sigmoid(0) * 4 / tau
    "geo_mean": lambda a, lp: -a,  # with sequence-level advantages: -mean_t(A) * exp(0)
    "cpgd": lambda a, lp: 0.0,  # log-ratio 0
}


def _params(name: str) -> dict[str, object]:
    """Parameters that make a loss deterministic: a fresh seeded draw for clip_cov."""
    if name == "clip_cov":
        return {"generator": torch.Generator().manual_seed(0)}
    return {}


def _rebuild(inputs: PolicyLossInputs, **changes: torch.Tensor) -> PolicyLossInputs:
    fields = {
        "log_probs": inputs.log_probs.detach().clone(),
        "old_log_probs": inputs.old_log_probs,
        "advantages": inputs.advantages,
        "response_mask": inputs.response_mask,
        "rollout_is_weights": inputs.rollout_is_weights,
        "rollout_log_probs": inputs.rollout_log_probs,
    }
    fields.update(changes)
    fields["log_probs"] = fields["log_probs"].requires_grad_(True)
    return PolicyLossInputs(**fields)


def test_every_loss_has_a_closed_form_here() -> None:
    assert sorted(CLOSED_FORMS) == sorted(POLICY_LOSSES)


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
@settings(max_examples=40, deadline=None)
@given(inputs=random_inputs(with_weights=True, with_rollout=True), junk=_JUNK)
def test_masked_tokens_never_change_loss_metrics_or_gradient(name: str, inputs: PolicyLossInputs, junk: float) -> None:
    loss_fn = POLICY_LOSSES[name]
    clean = _rebuild(inputs)
    out = loss_fn(clean, **_params(name))
    out.loss.backward()
    off = ~inputs.mask
    poisoned = _rebuild(
        inputs,
        log_probs=inputs.log_probs.detach().masked_fill(off, junk),
        old_log_probs=inputs.old_log_probs.masked_fill(off, junk),
        advantages=inputs.advantages.masked_fill(off, junk),
        rollout_is_weights=inputs.rollout_is_weights.masked_fill(off, junk),  # type: ignore[union-attr]
        rollout_log_probs=inputs.rollout_log_probs.masked_fill(off, junk),  # type: ignore[union-attr]
    )
    poisoned_out = loss_fn(poisoned, **_params(name))
    poisoned_out.loss.backward()
    assert torch.equal(poisoned_out.loss, out.loss)
    assert poisoned_out.metrics.keys() == out.metrics.keys()
    for key, value in out.metrics.items():
        assert torch.equal(poisoned_out.metrics[key], value), key
    assert clean.log_probs.grad is not None and poisoned.log_probs.grad is not None
    assert torch.equal(poisoned.log_probs.grad, clean.log_probs.grad)
    assert bool((clean.log_probs.grad[off] == 0).all())
    assert bool(clean.log_probs.grad.isfinite().all())


def _reference_aggregate(per_token: list[list[float]], mask: list[list[int]], mode: str) -> float:
    """The four aggregation modes written with loops, for a batch that is the whole step."""
    rows = [[v for v, m in zip(values, bits, strict=True) if m] for values, bits in zip(per_token, mask, strict=True)]
    nonempty = [row for row in rows if row]
    num_tokens = sum(len(row) for row in rows)
    if mode == "token-mean":
        return sum(sum(row) for row in rows) / num_tokens
    if mode == "seq-mean-token-sum":
        return sum(sum(row) for row in nonempty) / len(nonempty)
    if mode == "seq-mean-token-mean":
        return sum(sum(row) / len(row) for row in nonempty) / len(nonempty)
    return sum(sum(row) for row in nonempty) / (len(nonempty) * len(mask[0]))


def _on_policy(inputs: PolicyLossInputs) -> PolicyLossInputs:
    return _rebuild(inputs, log_probs=inputs.old_log_probs.clone(), rollout_log_probs=inputs.old_log_probs.clone())


def _closed_form_params(name: str) -> dict[str, object]:
    # No covariance of these small batches lies in (1e9, 1e10): clip_cov drops nothing.
    return {"clip_cov_lb": 1e9, "clip_cov_ub": 1e10} if name == "clip_cov" else {}


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
@settings(max_examples=25, deadline=None)
@given(inputs=random_inputs(sequence_advantages=True))
def test_value_and_gradient_at_the_old_policy(name: str, mode: str, inputs: PolicyLossInputs) -> None:
    inputs = _on_policy(inputs)
    out = POLICY_LOSSES[name](inputs, aggregation=mode, **_closed_form_params(name))
    advantages, log_probs, mask = inputs.advantages.tolist(), inputs.old_log_probs.tolist(), inputs.mask.int().tolist()
    closed = CLOSED_FORMS[name]
    per_token = [
        [closed(a, lp) for a, lp in zip(a_row, lp_row, strict=True)]
        for a_row, lp_row in zip(advantages, log_probs, strict=True)
    ]
    assert out.loss.item() == pytest.approx(_reference_aggregate(per_token, mask, mode), rel=1e-9, abs=1e-12)
    # Every loss's gradient there is REINFORCE's: d/d log_probs of the aggregate of -A * log_probs.
    out.loss.backward()
    reinforce = [[-a for a in row] for row in advantages]
    length = len(mask[0])
    for i, bits in enumerate(mask):
        for t, bit in enumerate(bits):
            unit = [[1.0 if (j, s) == (i, t) else 0.0 for s in range(length)] for j in range(len(mask))]
            expected = _reference_aggregate(unit, mask, mode) * reinforce[i][t] if bit else 0.0
            assert inputs.log_probs.grad[i, t].item() == pytest.approx(expected, rel=1e-9, abs=1e-12)  # type: ignore[index]


# clip_cov and kl_cov pick tokens by statistics of the batch they see, so they are not additive.
ADDITIVE = sorted(set(POLICY_LOSSES) - {"clip_cov", "kl_cov"})


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
@pytest.mark.parametrize("name", ADDITIVE)
@settings(max_examples=20, deadline=None)
@given(inputs=random_inputs(max_batch=6, with_weights=True, with_rollout=True), cut=st.integers(1, 5))
def test_micro_batches_sum_to_the_full_batch(name: str, mode: str, inputs: PolicyLossInputs, cut: int) -> None:
    size = inputs.mask.shape[0]
    norm = LossNormalizer.from_mask(inputs.mask)
    full = POLICY_LOSSES[name](inputs, aggregation=mode, normalizer=norm).loss.item()
    cut = min(cut, size)
    total = 0.0
    for rows in (slice(0, cut), slice(cut, size)):
        part = PolicyLossInputs(
            log_probs=inputs.log_probs[rows],
            old_log_probs=inputs.old_log_probs[rows],
            advantages=inputs.advantages[rows],
            response_mask=inputs.response_mask[rows],
            rollout_is_weights=inputs.rollout_is_weights[rows],  # type: ignore[index]
            rollout_log_probs=inputs.rollout_log_probs[rows],  # type: ignore[index]
        )
        total += POLICY_LOSSES[name](part, aggregation=mode, normalizer=norm).loss.item()
    assert total == pytest.approx(full, rel=1e-10, abs=1e-12)
