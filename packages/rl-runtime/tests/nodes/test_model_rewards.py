"""Model-based rewards in the reward node: the reward model reads the batch's own ids or the task's decoded text,
its weighted score joins the rule reward (`algorithm.rule_reward_weight`), and its metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import torch

from rl_core.schema import INPUT_IDS, PROMPT_LEN, RESPONSE_LEN, RESPONSE_MASK, UID
from rl_engines.reward_model import RewardModelConfig, RewardModelScorer, TokenizerMode
from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources, PromptItem, ResponseSample, ScoreResult
from rl_runtime.nodes._reward import sequence_scores
from rl_runtime.workers import StepData

PIECES = "abcdefghij"


class LetterTask:
    """Token id i + 2 is letter i; the rule reward is the response length."""

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        raise NotImplementedError

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        return ScoreResult(tuple(float(len(sample.response_ids)) for sample in samples), {"reward/task_metric": 1.0})

    def decode(self, token_ids: Sequence[int]) -> str:
        return "".join(PIECES[token - 2] for token in token_ids)


def _scorer(mode: TokenizerMode, weight: float = 1.0) -> RewardModelScorer:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    # The reward model's own vocabulary puts the letters 3 ids higher than the policy's.
    vocab = {"<pad>": 0, "<eos>": 1, "<x>": 2, "<y>": 3, "<z>": 4, **{p: i + 5 for i, p in enumerate(PIECES)}}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")
    config = LlamaConfig(
        vocab_size=16, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32, num_labels=1, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    return RewardModelScorer(
        LlamaForSequenceClassification(config), tokenizer, RewardModelConfig("rm", tokenizer=mode, weight=weight)
    )


def _data() -> StepData:
    input_ids = torch.tensor([[2, 3, 4, 5, 0], [6, 7, 8, 9, 10]])
    return StepData(
        batch={
            INPUT_IDS: input_ids,
            RESPONSE_MASK: torch.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 1, 1]]),
            PROMPT_LEN: torch.tensor([2, 1]),
            RESPONSE_LEN: torch.tensor([2, 4]),
            UID: torch.tensor([0, 1]),
        }
    )


def _resources(scorer: RewardModelScorer, rule_weight: float, minimal: Mapping[str, Any]) -> NodeResources:
    section = f"reward_model={{path: rm, tokenizer: {scorer.config.tokenizer.value}, weight: {scorer.config.weight}}}"
    config = config_from_dict(RunConfig, minimal, [section, f"algorithm.rule_reward_weight={rule_weight}"])
    return NodeResources(
        config=config, plan=None, task=LetterTask(), prompts=None, rollout=None, actor=None,
        reward_model=scorer,
    )  # fmt: skip


MINIMAL = {"data": {"train_files": ["train.jsonl"]}, "actor": {"model": {"path": "/models/policy"}}}


def test_same_tokens_score_the_batchs_own_ids() -> None:
    scorer = _scorer(TokenizerMode.SAME)
    scores, metrics = sequence_scores(_resources(scorer, 0.0, MINIMAL), _data())
    expected = scorer.score_ids([[2, 3, 4, 5], [6, 7, 8, 9, 10]]).scores
    torch.testing.assert_close(scores, expected)
    assert metrics["reward/model_mean"] == pytest.approx(expected.mean().item())
    assert metrics["reward/model_truncated_frac"] == 0.0 and "timing_s/reward_model" in metrics
    assert "reward/task_metric" not in metrics  # rule_reward_weight=0: the task is not asked


def test_retokenized_text_reads_the_reward_models_vocabulary_and_joins_the_rule_reward() -> None:
    scorer = _scorer(TokenizerMode.RETOKENIZE, weight=2.0)
    scores, metrics = sequence_scores(_resources(scorer, 0.5, MINIMAL), _data())
    model = scorer.score_ids([[5, 6, 7, 8], [9, 10, 11, 12, 13]]).scores  # "ab"+"cd", "e"+"fghi" in its own ids
    torch.testing.assert_close(scores, 0.5 * torch.tensor([2.0, 4.0]) + 2.0 * model)
    assert metrics["reward/task_metric"] == 1.0 and metrics["reward/model_max"] == pytest.approx(model.max().item())


class SleepyJudgeEngine:
    """A colocated rollout engine put to sleep after generation: it answers "yes" to prompts holding "b"."""

    capabilities = frozenset({"sleep"})

    def __init__(self) -> None:
        self.awake = False
        self.calls: list[str] = []

    def wake_up(self) -> None:
        self.awake, self.calls = True, [*self.calls, "wake"]

    def sleep(self, level: int = 1) -> None:
        self.awake, self.calls = False, [*self.calls, "sleep"]

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        from rl_engines.rollout import GenerateOutput

        assert self.awake, "the judge asked a sleeping engine"
        answers = [(ord("y"),) if ord("b") in request.input_ids else (ord("?"),) for request in requests]
        return [GenerateOutput(r.rid, ids, None, "stop", 0, 1) for r, ids in zip(requests, answers, strict=True)]


def test_the_judge_wakes_the_sleeping_rollout_engine_and_counts_answers_without_a_verdict() -> None:
    from rl_engines.judge import GenerativeJudge, JudgeConfig

    class CharTokenizer:
        eos_token_id = None

        def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
            return {"input_ids": [ord(char) for char in text]}  # not-a-sample-field: tokenizer output key

        def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
            return {ord("y"): "yes", ord("?"): "hmm"}[ids[0]]

    engine = SleepyJudgeEngine()
    config = config_from_dict(RunConfig, MINIMAL, ["judge={weight: 3.0, default_score: -1.0}"])
    judge = GenerativeJudge(engine, CharTokenizer(), config.judge)  # type: ignore[arg-type]
    res = NodeResources(
        config=config, plan=None, task=LetterTask(), prompts=None, rollout=engine, actor=None,
        judge=judge,
    )  # fmt: skip
    scores, metrics = sequence_scores(res, _data())
    # rows: prompt "ab" (holds b: yes -> 1.0), prompt "e" (no verdict -> -1.0); plus the rule reward 2 and 4
    torch.testing.assert_close(scores, torch.tensor([2.0 + 3.0 * 1.0, 4.0 + 3.0 * -1.0]))
    assert metrics["reward/judge_unparsed_frac"] == 0.5 and metrics["reward/judge_mean"] == 0.0
    assert engine.calls == ["wake", "sleep"] and "timing_s/judge" in metrics
    assert JudgeConfig().weight == 1.0
