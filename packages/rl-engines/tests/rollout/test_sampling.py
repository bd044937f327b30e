"""Per-row token choice: greedy, truncation against transformers' warpers, distributions, seeds, log-probs."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from rl_engines.rollout import SamplingParams
from rl_engines.rollout._sampling import UNIFORM_BLOCK, BatchSampler, _inverse_cdf

VOCAB = 50


def _logits(rows: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(seed)) * 3


def _sampler(*params: SamplingParams, seed: int = 0) -> BatchSampler:
    return BatchSampler(list(params), torch.device("cpu"), torch.Generator().manual_seed(seed))


def test_greedy_rows_take_argmax_with_raw_logprobs() -> None:
    logits = _logits(3)
    tokens, logprobs = _sampler(*[SamplingParams(max_new_tokens=1, temperature=0.0)] * 3)(logits)
    assert tokens.tolist() == logits.argmax(-1).tolist()
    expected = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(logprobs, expected)


@pytest.mark.parametrize(("top_k", "top_p"), [(5, 1.0), (-1, 0.7), (8, 0.5), (1, 1.0), (-1, 0.01)])
def test_truncation_matches_transformers_warpers(top_k: int, top_p: float) -> None:
    logits = _logits(4, seed=1) / 0.8
    sampler = _sampler(*[SamplingParams(max_new_tokens=1, temperature=0.8, top_k=top_k, top_p=top_p)] * 4)
    ours = sampler._truncate(logits)
    reference = logits.clone()
    if top_k != -1:
        reference = TopKLogitsWarper(top_k)(None, reference)
    if top_p < 1.0:
        reference = TopPLogitsWarper(top_p)(None, reference)
    assert torch.equal(torch.isinf(ours), torch.isinf(reference))
    torch.testing.assert_close(ours[~torch.isinf(ours)], logits[~torch.isinf(ours)])


def test_only_top_k_tokens_are_ever_drawn() -> None:
    logits = _logits(1, seed=2).repeat(400, 1)
    tokens, _ = _sampler(*[SamplingParams(max_new_tokens=1, temperature=1.5, top_k=3)] * 400)(logits)
    assert set(tokens.tolist()) <= set(logits[0].topk(3).indices.tolist())
    assert len(set(tokens.tolist())) == 3


def test_draws_follow_the_temperature_scaled_distribution() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(20000, 1)
    tokens, logprobs = _sampler(*[SamplingParams(max_new_tokens=1, temperature=0.7)] * 20000)(logits)
    expected = torch.softmax(logits[0] / 0.7, -1)
    observed = torch.bincount(tokens, minlength=4).float() / tokens.numel()
    torch.testing.assert_close(observed, expected, atol=0.015, rtol=0)
    torch.testing.assert_close(logprobs, torch.log(expected)[tokens])


def test_logprobs_ignore_truncation() -> None:
    logits = _logits(2, seed=3)
    tokens, logprobs = _sampler(*[SamplingParams(max_new_tokens=1, temperature=0.5, top_k=2)] * 2)(logits)
    expected = torch.log_softmax(logits / 0.5, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(logprobs, expected)


def test_seeded_row_is_independent_of_batchmates() -> None:
    seeded = SamplingParams(max_new_tokens=1, temperature=1.0, seed=7)
    other = SamplingParams(max_new_tokens=1, temperature=1.0)
    row = _logits(1, seed=4)
    alone = _sampler(seeded)
    crowded = _sampler(other, seeded, other, seed=99)
    draws_alone = [int(alone(row)[0][0]) for _ in range(30)]
    draws_crowded = [int(crowded(torch.cat([_logits(1, 5), row, _logits(1, 6)]))[0][1]) for _ in range(30)]
    assert draws_alone == draws_crowded
    assert len(set(draws_alone)) > 1


def test_select_keeps_each_rows_own_generator() -> None:
    a = SamplingParams(max_new_tokens=1, temperature=1.0, seed=1)
    b = SamplingParams(max_new_tokens=1, temperature=1.0, seed=2)
    row = _logits(1, seed=8)
    reference = _sampler(b)
    sampler = _sampler(a, b)
    sampler(row.repeat(2, 1))
    reference(row)
    sampler.select([1])
    assert [int(sampler(row)[0][0]) for _ in range(10)] == [int(reference(row)[0][0]) for _ in range(10)]


def test_mixed_batch_greedy_row_stays_argmax() -> None:
    logits = _logits(2, seed=9)
    params = [SamplingParams(max_new_tokens=1, temperature=0.0), SamplingParams(max_new_tokens=1, temperature=2.0)]
    for _ in range(5):
        tokens, logprobs = _sampler(*params)(logits)
        assert int(tokens[0]) == int(logits[0].argmax())
        torch.testing.assert_close(logprobs[0], torch.log_softmax(logits[0], -1)[tokens[0]])


def test_seeded_rows_stay_independent_across_uniform_blocks() -> None:
    seeded = SamplingParams(max_new_tokens=1, temperature=1.0, seed=11)
    row = _logits(1, seed=10)
    alone = _sampler(seeded)
    crowded = _sampler(SamplingParams(max_new_tokens=1, temperature=1.0), seeded, seed=5)
    steps = 2 * UNIFORM_BLOCK + 3
    draws_alone = [int(alone(row)[0][0]) for _ in range(steps)]
    draws_crowded = [int(crowded(torch.cat([_logits(1, 12), row]))[0][1]) for _ in range(steps)]
    assert draws_alone == draws_crowded


def test_a_seeded_row_joining_mid_batch_draws_as_if_alone() -> None:
    seeded = SamplingParams(max_new_tokens=1, temperature=1.0, seed=13)
    row = _logits(1, seed=14)
    alone = _sampler(seeded)
    crowded = _sampler(SamplingParams(max_new_tokens=1, temperature=1.0, seed=3), seed=5)
    for _ in range(UNIFORM_BLOCK // 2 + 5):  # join in the middle of the batchmate's uniform block
        crowded(_logits(1, 15))
    crowded.extend([seeded])
    steps = UNIFORM_BLOCK + 3
    draws_alone = [int(alone(row)[0][0]) for _ in range(steps)]
    draws_crowded = [int(crowded(torch.cat([_logits(1, 16), row]))[0][1]) for _ in range(steps)]
    assert draws_alone == draws_crowded
    assert len(set(draws_alone)) > 1


@pytest.mark.parametrize("uniform", [0.0, 0.5, 1.0 - 2**-24])
def test_inverse_cdf_never_draws_a_token_without_mass(uniform: float) -> None:
    probs = torch.tensor([[0.0, 0.3, 0.0, 0.7, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]])
    tokens = _inverse_cdf(probs, torch.full((2,), uniform))
    assert probs[torch.arange(2), tokens].gt(0).all()


def test_inverse_cdf_splits_the_unit_interval_by_mass() -> None:
    probs = torch.tensor([[0.25, 0.5, 0.25]]).repeat(4, 1)
    tokens = _inverse_cdf(probs, torch.tensor([0.1, 0.3, 0.74, 0.8]))
    assert tokens.tolist() == [0, 1, 1, 2]


def _reference_draw(row_logits: torch.Tensor, temperature: float, uniform: float) -> int:
    """The first token whose cumulative mass exceeds `uniform` times the total: a linear scan, not a search."""
    cdf = torch.log_softmax(row_logits / temperature, -1).exp().cumsum(-1)
    return int((cdf > uniform * cdf[-1]).nonzero()[0])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("batchmates", ["none", "greedy_and_unseeded"])
def test_seeded_rows_draw_their_own_uniforms_in_order(temperature: float, batchmates: str) -> None:
    seeds = [3, 14, 15]
    seeded = [SamplingParams(max_new_tokens=1, temperature=temperature, seed=s) for s in seeds]
    others = [SamplingParams(max_new_tokens=1, temperature=0.0), SamplingParams(max_new_tokens=1, temperature=1.0)]
    params = seeded if batchmates == "none" else [others[0], *seeded, others[1]]
    positions = [params.index(p) for p in seeded]
    sampler = _sampler(*params)
    streams = [torch.Generator().manual_seed(s) for s in seeds]
    steps = UNIFORM_BLOCK + 5
    uniforms = [torch.cat([torch.rand(UNIFORM_BLOCK, generator=g) for _ in range(2)]).tolist() for g in streams]
    for step in range(steps):
        logits = _logits(len(params), seed=100 + step)
        tokens, _ = sampler(logits)
        expected = [_reference_draw(logits[j], temperature, u[step]) for j, u in zip(positions, uniforms, strict=True)]
        assert tokens[positions].tolist() == expected


def test_inverse_cdf_maps_a_uniform_of_one_to_the_last_token_with_mass() -> None:
    probs = torch.tensor([[0.0, 0.3, 0.0, 0.7, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0, 0.0]])
    assert _inverse_cdf(probs, torch.tensor([1.0, 1.0, 0.25])).tolist() == [3, 2, 0]
