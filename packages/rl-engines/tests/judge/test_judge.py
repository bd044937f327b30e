"""The generative judge: verdict parsing (yes/no, numbers, custom patterns), scoring through an engine with a
default for answers without a verdict, and the config's refusals."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_engines.judge import (
    NUMBER_PATTERN,
    YES_NO_PATTERN,
    GenerativeJudge,
    JudgeConfig,
    JudgeEngine,
    VerdictKind,
    parse_verdict,
)
from rl_engines.rollout import GenerateOutput, GenerateRequest
from rl_engines.training import TrainConfigError

YES_NO = re.compile(YES_NO_PATTERN, re.IGNORECASE)
NUMBER = re.compile(NUMBER_PATTERN, re.IGNORECASE)
FILLER = st.text(alphabet="abcdfghijklmpqrtuvwxz ,.\n", max_size=20).map(lambda text: f" {text} ")


@settings(deadline=None)  # a loaded CI machine may stall an example; the property is what counts
@given(FILLER, st.sampled_from(["yes", "Yes", "YES", "no", "No"]), FILLER)
def test_a_yes_or_no_anywhere_is_the_verdict(before: str, word: str, after: str) -> None:
    assert parse_verdict(before + word + after, VerdictKind.YES_NO, YES_NO) == (1.0 if word.lower() == "yes" else 0.0)


@settings(deadline=None)  # a loaded CI machine may stall an example; the property is what counts
@given(FILLER, st.integers(-1000, 1000), FILLER)
def test_the_first_number_is_the_verdict(before: str, value: int, after: str) -> None:
    assert parse_verdict(f"{before}{value}{after} 7", VerdictKind.NUMBER, NUMBER) == float(value)


@settings(deadline=None)  # a loaded CI machine may stall an example; the property is what counts
@given(st.text(alphabet="abcdfghijklmpqrtuvwxz ,.\n", max_size=30))
def test_text_without_a_verdict_is_none(text: str) -> None:
    assert parse_verdict(text, VerdictKind.YES_NO, YES_NO) is None
    assert parse_verdict(text, VerdictKind.NUMBER, NUMBER) is None


def test_a_custom_pattern_reads_its_first_group() -> None:
    pattern = JudgeConfig(verdict=VerdictKind.NUMBER, pattern=r"score:\s*(\d+)/10").verdict_pattern
    assert parse_verdict("7 reasons... Score: 8/10", VerdictKind.NUMBER, pattern) == 8.0
    assert parse_verdict("yesterday no", VerdictKind.YES_NO, YES_NO) == 0.0  # whole words only


class ScriptedEngine:
    """Answers each request with the next scripted text, one character per token id (id = ord)."""

    def __init__(self, answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.prompts: list[tuple[int, ...]] = []

    def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateOutput]:
        outputs = []
        for request in requests:
            self.prompts.append(request.input_ids)
            ids = tuple(ord(char) for char in self.answers.pop(0))
            outputs.append(GenerateOutput(request.rid, ids, None, "stop", 0, len(request.input_ids)))
        return outputs


class CharTokenizer:
    eos_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": [ord(char) for char in text]}  # not-a-sample-field: tokenizer output key

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(token) for token in ids)


def test_the_judge_fills_the_template_and_scores_unparsed_answers_by_default() -> None:
    engine = ScriptedEngine([" yes", " No.", " maybe"])
    config = JudgeConfig(template="Q {prompt} A {response} ok?", default_score=0.25)
    judge = GenerativeJudge(engine, CharTokenizer(), config)  # type: ignore[arg-type]
    result = judge.score(["1+1", "2+2", "3+3"], ["2", "5", "6"])
    assert result.scores.tolist() == [1.0, 0.0, 0.25] and result.scores.dtype == torch.float32
    assert result.unparsed == 1 and result.answers == (" yes", " No.", " maybe")
    assert "".join(map(chr, engine.prompts[0])) == "Q 1+1 A 2 ok?"


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"engine": JudgeEngine.SERVER}, r"base_url must be an http://host:port address with engine=server"),
        ({"base_url": "http://h:1"}, r"base_url must be null with engine=rollout"),
        ({"template": "no placeholder"}, r"template must be a str with a \{response\} placeholder"),
        ({"template": "{response} {other}"}, r"template must be placeholders \{prompt\} and \{response\} only"),
        ({"pattern": "(unclosed"}, r"pattern must be a valid regular expression"),
        ({"default_score": float("inf")}, r"default_score must be a finite number"),
        ({"max_new_tokens": 0}, r"max_new_tokens must be an int >= 1"),
        ({"temperature": -1.0}, r"temperature must be a finite number >= 0"),
    ],
)
def test_config_errors_name_the_field(change: dict[str, object], match: str) -> None:
    with pytest.raises(TrainConfigError, match=match):
        dataclasses.replace(JudgeConfig(), **change)
