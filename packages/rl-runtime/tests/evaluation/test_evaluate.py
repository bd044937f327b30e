"""`evaluate_prompts` against a seeded test-double engine: the requests it sends, the scores and totals it
reads, pass@k, and agreement with the rollout path (`sample_prompts` + `task_scores`) validation used before."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from rl_engines.rollout import GenerateOutput, GenerateRequest, SamplingParams
from rl_runtime.evaluation import PASS_SCORE, Evaluation, evaluate_prompts
from rl_runtime.evaluation._evaluate import SUM_KEYS, reduce_validation
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult
from rl_runtime.nodes._generate import sample_prompts
from rl_runtime.nodes._reward import task_scores
from rl_runtime.nodes._seeds import sample_seed

TARGET_KEY = "target"


class SeededEngineDouble:
    """Test double for a rollout engine: each response is 1-5 tokens drawn from the request's own seed, so
    the same request always gets the same response; records the requests."""

    def __init__(self) -> None:
        self.requests: list[GenerateRequest] = []

    def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateOutput]:
        self.requests += requests
        outputs = []
        for request in requests:
            rng = random.Random(request.sampling.seed)
            ids = tuple(rng.randrange(4, 12) for _ in range(rng.randint(1, 5)))
            outputs.append(GenerateOutput(request.rid, ids, None, "stop", "0", len(request.input_ids)))
        return outputs


class HitTask:
    """Test double of a task: a response scores 1 when it holds the prompt's target token, 0.5 when it holds
    the token after it, else 0."""

    def encode(self, row: dict[str, Any], where: str) -> PromptItem:
        return PromptItem(tuple(row["ids"]), {TARGET_KEY: row[TARGET_KEY]})

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        def one(sample: ResponseSample) -> float:
            target = sample.extras[TARGET_KEY]
            return 1.0 if target in sample.response_ids else 0.5 if target + 1 in sample.response_ids else 0.0

        return ScoreResult(tuple(one(sample) for sample in samples), {"reward/calls": 1.0})

    def decode(self, token_ids: Sequence[int]) -> str:
        return " ".join(map(str, token_ids))


ITEMS = [PromptItem((1, 2, 3), {TARGET_KEY: target}) for target in (5, 7, 9, 11)]
SAMPLING = SamplingParams(max_new_tokens=5, temperature=1.0, stop_token_ids=(2,))


def _seed(index: int) -> int:
    return sample_seed(0, 99, index)


def test_requests_carry_the_sampling_and_each_response_its_own_seed_and_id() -> None:
    engine = SeededEngineDouble()
    evaluate_prompts(
        engine, HitTask(), ITEMS[:2], samples_per_prompt=3, sampling=SAMPLING, seed_of=_seed, rid_of=lambda i: f"e{i}"
    )
    assert [r.rid for r in engine.requests] == [f"e{i}" for i in range(6)]
    assert [r.input_ids for r in engine.requests] == [(1, 2, 3)] * 6
    assert [r.sampling.seed for r in engine.requests] == [_seed(i) for i in range(6)]
    assert {(r.sampling.max_new_tokens, r.sampling.stop_token_ids) for r in engine.requests} == {(5, (2,))}
    assert not any(r.return_logprobs for r in engine.requests)


def test_scores_mean_pass_at_k_and_totals_by_hand() -> None:
    evaluation = Evaluation(2, ((5,), (6,), (1,), (7, 7)), (1.0, 0.5, 0.0, 1.0), {})
    assert evaluation.num_prompts == 2 and evaluation.prompt_scores(1) == (0.0, 1.0)
    assert [evaluation.num_correct(i) for i in range(2)] == [1, 1]
    assert evaluation.mean_score == 0.625
    assert evaluation.pass_at_k(1) == 0.5 and evaluation.pass_at_k(2) == 1.0
    sums = evaluation.sums()
    assert sums == {
        "num_prompts": 2.0,
        "num_samples": 4.0,
        "score_sum": 2.5,
        "best_sum": 2.0,
        "pass_count": 2.0,
        "response_tokens": 5.0,
    }
    metrics = reduce_validation([sums, dict.fromkeys(SUM_KEYS, 0.0)], k=2)
    assert metrics == {
        "val/reward/mean@2": 0.625,
        "val/reward/best@2": 1.0,
        "val/pass@2": 1.0,
        "val/response_length/mean": 1.25,
        "val/num_prompts": 2.0,
    }
    assert reduce_validation([dict.fromkeys(SUM_KEYS, 0.0)], k=2) == {}
    assert Evaluation(2, (), ()).sums() == dict.fromkeys(SUM_KEYS, 0.0)


@pytest.mark.parametrize("samples_per_prompt", [1, 4])
def test_agrees_with_the_rollout_batch_path_validation_took_before(samples_per_prompt: int) -> None:
    """The totals equal those the Trainer's validation computed from `sample_prompts` and `task_scores`."""
    task = HitTask()
    evaluation = evaluate_prompts(
        SeededEngineDouble(),
        task,
        ITEMS,
        samples_per_prompt=samples_per_prompt,
        sampling=SAMPLING,
        seed_of=lambda i: sample_seed(0, 99, 1, i),
    )
    data = sample_prompts(
        SeededEngineDouble(),
        ITEMS,
        samples_per_prompt,
        SAMPLING,
        seed_parts=(0, 99, 1),
        uid_of=(0, 1, 0),
        policy_version=0,
    )
    scores, _ = task_scores(task, data)
    best = scores.view(len(ITEMS), samples_per_prompt).max(dim=1).values
    before = {
        "num_prompts": float(len(ITEMS)),
        "num_samples": float(scores.numel()),
        "score_sum": float(scores.sum()),
        "best_sum": float(best.sum()),
        "pass_count": float((best >= PASS_SCORE).sum()),
        "response_tokens": float(data.batch["response_len"].sum()),
    }
    assert evaluation.sums() == before
    assert 0 < before["score_sum"] < before["num_samples"]  # the case mixes hits and misses
    assert math.isclose(evaluation.mean_score, before["score_sum"] / before["num_samples"])
