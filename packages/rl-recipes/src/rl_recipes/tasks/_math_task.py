"""The math task as the runtime sees it: GSM8K-format rows become prompt token ids, responses get rule rewards."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rl_recipes.rewards import RewardFunction, RewardRunner, RewardSample, format_reward, load_reward_function
from rl_recipes.tasks._loading import ANSWER_FIELD, QUESTION_FIELD, DatasetError, extract_ground_truth
from rl_recipes.tasks._prompt import PLAIN_TEMPLATE, build_prompt, encode_prompt
from rl_recipes.tasks._tokenizer import load_tokenizer
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult

GROUND_TRUTH_KEY = "ground_truth"
FAILURE_METRIC = "reward/{kind}_failure_count"
"""The task metric counting the responses whose reward failed with `kind` (error, timeout, ...)."""
_FAILURE_PREFIX, _FAILURE_SUFFIX = FAILURE_METRIC.split("{kind}")


def reward_failures(metrics: Mapping[str, float]) -> int:
    """Responses whose reward failed, of any kind, from a `MathTask.score`'s metrics."""
    return sum(
        int(value)
        for name, value in metrics.items()
        if name.startswith(_FAILURE_PREFIX) and name.endswith(_FAILURE_SUFFIX)
    )


_DEFAULT_REWARD_TIMEOUT_S = 5.0


def _positive(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"task.{attribute.name} must be a number > 0, got {value!r}")


def _non_negative(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"task.{attribute.name} must be a number >= 0, got {value!r}")


def _fillable_template(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # The prompt builder fills it when the rollout workers encode the prompts; a template it cannot fill is refused
    # when the config loads instead.
    if not isinstance(value, str):
        raise ValueError(f"task.{attribute.name} must be a str with a {{question}} placeholder, got {value!r}")
    try:
        build_prompt("", template=value)
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"task.{attribute.name} must be a str.format template whose only placeholder is {{question}}, got "
            f"{value!r} ({type(error).__name__}: {error}); escape a literal brace as {{{{ or }}}}"
        ) from None


@attrs.frozen
class MathTaskConfig:
    """The math task: where questions and answers are, the prompt template and the reward."""

    reward: str = "gsm8k_exact_match"
    """A registered reward name, `pkg.mod:fn`, or `path/to/file.py:fn` with `fn(response, ground_truth) -> float`
    (add `**extra` to receive the row's extras as keywords)."""
    format_weight: float = attrs.field(default=0.0, validator=_non_negative)
    """Weight of the `#### N` format reward added to the main reward; 0 disables it."""
    question_field: str = QUESTION_FIELD
    """Row field holding the question."""
    answer_field: str = ANSWER_FIELD
    """Row field holding the answer text, ending `#### N`."""
    template: str = attrs.field(default=PLAIN_TEMPLATE, validator=_fillable_template)
    """Prompt template with `{question}`, used when the tokenizer has no chat template."""
    reward_timeout_s: float = attrs.field(default=_DEFAULT_REWARD_TIMEOUT_S, validator=_positive)
    """A reward call that takes longer scores 0 and is counted as a timeout failure."""


class MathTask:
    """`rl_runtime.nodes.Task` for GSM8K-format math: the prompt from the question, the rule reward on the answer."""

    def __init__(
        self, config: MathTaskConfig, tokenizer: str | Path | Any, *, reward_fn: RewardFunction | None = None
    ) -> None:
        """`tokenizer`: a tokenizer folder or a loaded tokenizer; `reward_fn`, when given, replaces `config.reward`."""
        self.config = config
        self.tokenizer = load_tokenizer(tokenizer) if isinstance(tokenizer, (str, Path)) else tokenizer
        reward = load_reward_function(config.reward) if reward_fn is None else reward_fn
        self.runner = RewardRunner(reward, config.reward_timeout_s)

    def prompt_ids(self, question: str) -> tuple[int, ...]:
        """Token ids of the prompt of `question`."""
        prompt = build_prompt(question, self.tokenizer, template=self.config.template)
        return tuple(encode_prompt(prompt, self.tokenizer))

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        """The prompt of `row` and its ground truth; DatasetError names `where` and the bad field."""
        values = {}
        for name in (self.config.question_field, self.config.answer_field):
            value = row.get(name)
            if not isinstance(value, str):
                found = "missing" if value is None else f"a {type(value).__name__}"
                raise DatasetError(f"{where}: field {name!r} is {found}, expected text (fields: {', '.join(row)})")
            values[name] = value
        try:
            truth = extract_ground_truth(values[self.config.answer_field])
        except ValueError as error:
            raise DatasetError(f"{where}: field {self.config.answer_field!r}: {error}") from None
        return PromptItem(self.prompt_ids(values[self.config.question_field]), {GROUND_TRUTH_KEY: truth})

    def decode(self, token_ids: Sequence[int]) -> str:
        """The text of `token_ids` without special tokens."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        """The reward of each response; failures score 0 and are counted per kind."""
        texts = [self.decode(sample.response_ids) for sample in samples]
        requests = [
            RewardSample(sample.uid, text, str(sample.extras[GROUND_TRUTH_KEY]))
            for sample, text in zip(samples, texts, strict=True)
        ]
        results = self.runner.run(requests)
        scores = list(results.scores)
        metrics = {FAILURE_METRIC.format(kind=kind): float(count) for kind, count in results.failures.items()}
        if self.config.format_weight > 0:
            formats = [format_reward(text, "") for text in texts]
            scores = [score + self.config.format_weight * fmt for score, fmt in zip(scores, formats, strict=True)]
            metrics["reward/format_rate"] = sum(formats) / len(formats)
        return ScoreResult(tuple(scores), metrics)


@attrs.frozen
class MathTaskFactory:
    """Builds a MathTask in each worker (picklable: the config and the tokenizer folder)."""

    config: MathTaskConfig
    tokenizer_path: str

    def __call__(self) -> MathTask:
        return MathTask(self.config, self.tokenizer_path)
