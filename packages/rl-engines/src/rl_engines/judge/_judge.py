"""`GenerativeJudge`: ask a rollout engine to grade each response and parse its verdict into a score."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl_engines.judge._config import JudgeConfig, VerdictKind
from rl_engines.rollout import GenerateRequest, InferenceEngine, SamplingParams

_YES, _NO = "yes", "no"


def parse_verdict(text: str, kind: VerdictKind, pattern: re.Pattern[str]) -> float | None:
    """The score in the judge's answer `text`, or None when it holds none: the first match of `pattern` (its first
    group when it has one), read as yes (1.0) / no (0.0) or as a finite number by `kind`."""
    match = pattern.search(text)
    if match is None:
        return None
    found = (match.group(1) if pattern.groups else match.group(0)).strip()
    if kind is VerdictKind.YES_NO:
        word = found.lower()
        return 1.0 if word == _YES else 0.0 if word == _NO else None
    try:
        value = float(found)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class JudgeScores:
    """What one judging call found."""

    scores: torch.Tensor
    """`(B,)` float32, in sample order: the verdicts, `default_score` where none was found."""
    unparsed: int
    """Answers without a verdict."""
    answers: tuple[str, ...]
    """The judge's answer texts (for logs and tests)."""


class GenerativeJudge:
    """Grades `(prompt, response)` texts with `engine`, its prompts encoded and its answers decoded by `tokenizer`
    (the judge model's)."""

    def __init__(self, engine: InferenceEngine, tokenizer: Any, config: JudgeConfig) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.config = config
        self._pattern = config.verdict_pattern
        eos = tokenizer.eos_token_id
        self._sampling = SamplingParams(
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            stop_token_ids=() if eos is None else (int(eos),),
        )
        self._calls = 0

    def prompt_ids(self, prompt: str, response: str) -> list[int]:
        """The judge's prompt token ids for one sample."""
        text = self.config.template.format(prompt=prompt, response=response)
        return list(self.tokenizer(text, add_special_tokens=True)["input_ids"])  # not-a-sample-field: tokenizer key

    def score(self, prompts: Sequence[str], responses: Sequence[str]) -> JudgeScores:
        """One verdict per sample; an answer without one scores `config.default_score` and is counted."""
        if len(prompts) != len(responses):
            raise ValueError(f"got {len(prompts)} prompts for {len(responses)} responses")
        if not prompts:
            return JudgeScores(torch.zeros(0), 0, ())
        self._calls += 1
        requests = [
            GenerateRequest(f"judge-{self._calls}-{row}", tuple(self.prompt_ids(p, r)), self._sampling, False)
            for row, (p, r) in enumerate(zip(prompts, responses, strict=True))
        ]
        outputs = self.engine.generate(requests)
        answers = tuple(self.tokenizer.decode(list(out.output_ids), skip_special_tokens=True) for out in outputs)
        verdicts = [parse_verdict(answer, self.config.verdict, self._pattern) for answer in answers]
        unparsed = sum(verdict is None for verdict in verdicts)
        scores = [self.config.default_score if verdict is None else verdict for verdict in verdicts]
        return JudgeScores(torch.tensor(scores, dtype=torch.float32), unparsed, answers)
