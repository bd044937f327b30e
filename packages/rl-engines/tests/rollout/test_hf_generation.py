"""The decoding loop: shared prompts prefilled once, and outputs of repeated prompts against transformers."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from rl_engines.rollout import HFEngine
from rl_engines.rollout._fast_decode import PrefillKV
from rl_engines.rollout._hf_generation import _prefill, _Row, _spans
from rl_engines.rollout._types import VersionSpan
from rl_engines.testing import ConformanceModels, Harness, greedy_mismatch, reference_greedy, reference_logprobs

TIE_TOL = 1e-3
LOGIT_TOL = 1e-5
request = Harness.request


def _rows(prompts: list[list[int]]) -> list[_Row]:
    return [_Row(request(f"r{i}", p, 4), budget=4) for i, p in enumerate(prompts)]


@pytest.mark.parametrize("fast", [True, False], ids=["fast-prefill", "forward-prefill"])
def test_prefill_of_repeated_prompts_equals_a_forward_over_every_row(
    engine: HFEngine, models: ConformanceModels, fast: bool
) -> None:
    if not fast:
        engine._setup.fast_decoder = None
    a, b, c = models.prompts(3, min_len=2, max_len=9)
    prompts = [a, b, a, c, b, a]
    cache, logits, mask, last_pos = _prefill(engine._setup, _rows(prompts))
    reference = _prefill(engine._setup, _rows([a, b, c]))
    order = torch.tensor([0, 1, 0, 2, 1, 0])
    torch.testing.assert_close(logits, reference[1][order], atol=0, rtol=0)
    assert torch.equal(mask, reference[2][order]) and torch.equal(last_pos, reference[3][order])
    for mine, theirs in zip(_layer_tensors(cache), _layer_tensors(reference[0]), strict=True):
        assert torch.equal(mine, theirs[order])
    width = max(len(p) for p in prompts)
    for row, prompt in enumerate(prompts):
        with torch.no_grad():
            alone = models.v1(torch.tensor([prompt])).logits[0, -1].float()
        torch.testing.assert_close(logits[row].cpu(), alone, atol=LOGIT_TOL, rtol=0)
        assert mask[row].tolist() == [0] * (width - len(prompt)) + [1] * len(prompt)
        assert int(last_pos[row]) == len(prompt) - 1


def _layer_tensors(cache: DynamicCache | PrefillKV) -> list[torch.Tensor]:
    if isinstance(cache, PrefillKV):
        return [*cache.keys, *cache.values]
    return [layer.keys for layer in cache.layers] + [layer.values for layer in cache.layers]


def test_greedy_outputs_of_repeated_prompts_match_transformers(engine: HFEngine, models: ConformanceModels) -> None:
    a, b = models.prompts(2, min_len=2, max_len=12)
    prompts = [a, b, b, a, a]
    outputs = engine.generate([request(f"g{i}", p, 10) for i, p in enumerate(prompts)])
    for output, prompt in zip(outputs, prompts, strict=True):
        ids, margins = reference_greedy(models.v1, prompt, 10)
        assert greedy_mismatch(list(output.output_ids), ids, margins, TIE_TOL) is None
        reference = reference_logprobs(models.v1, prompt, list(output.output_ids), 0.0)
        torch.testing.assert_close(torch.tensor(output.output_logprobs), torch.tensor(reference), atol=1e-5, rtol=0)


def test_seeded_samples_of_a_shared_prompt_are_those_of_the_prompt_alone(
    engine: HFEngine, models: ConformanceModels
) -> None:
    prompt, other = models.prompts(2, min_len=3, max_len=10)
    seeds = [21, 22, 23]
    group = [request(f"s{s}", prompt, 8, temperature=1.0, seed=s) for s in seeds]
    batched = engine.generate([*group, request("o", other, 8, temperature=1.0, seed=5)])
    alone = [engine.generate([r])[0] for r in group]
    assert [o.output_ids for o in batched[:3]] == [o.output_ids for o in alone]
    assert len({o.output_ids for o in alone}) > 1


def test_decode_steps_with_a_ready_boolean_mask_match_the_padding_mask(
    engine: HFEngine, models: ConformanceModels
) -> None:
    assert engine._setup.boolean_mask  # the conformance model runs SDPA with full attention
    engine._setup.fast_decoder = None  # decode through the forward, which takes the mask
    prompts = models.prompts(4, min_len=2, max_len=12)
    requests = [request(f"m{i}", p, 10) for i, p in enumerate(prompts)]
    with_boolean = engine.generate(requests)
    engine._setup.boolean_mask = False
    engine.flush_cache()
    with_padding = engine.generate([request(f"p{i}", p, 10) for i, p in enumerate(prompts)])
    for got, want in zip(with_boolean, with_padding, strict=True):
        assert got.output_ids == want.output_ids
        got_logprobs, want_logprobs = torch.tensor(got.output_logprobs), torch.tensor(want.output_logprobs)
        torch.testing.assert_close(got_logprobs, want_logprobs, atol=LOGIT_TOL, rtol=0)


def test_version_spans_cover_each_run_of_one_version() -> None:
    assert _spans([]) == ()
    assert _spans([1, 1, 2, 2, 2, 1]) == (
        VersionSpan(1, 0, 2), VersionSpan(2, 2, 5), VersionSpan(1, 5, 6),
    )  # fmt: skip
