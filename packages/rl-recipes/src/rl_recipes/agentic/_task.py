"""The agentic task as the runtime sees it: a row becomes the chat prompt (with the calculator's schema), and an
episode's whole transcript after the prompt is scored: success is the right number in the final answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import attrs

from rl_recipes.agentic._problems import ANSWER_FIELD, MESSAGES_FIELD, QUESTION_FIELD, ProblemSpec
from rl_recipes.embedded import EMBEDDED_TOOLS_TOKENIZER, build_embedded_tokenizer
from rl_recipes.tasks import load_tokenizer
from rl_recipes.tools import calculator, function_schema
from rl_recipes.workflows import TOOL_CALL_OPEN, encode, render
from rl_runtime.config._validators import number_in, of_type
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult

GROUND_TRUTH_KEY = "ground_truth"
"""Extras key of a row's answer (the `tool_calling` workflow's default `ground_truth_key`)."""
ANSWER_PROMPT = "Answer:"
"""What the chat template writes before every assistant turn; the text after its last occurrence is the answer."""
SUCCESS_METRIC = "agentic/success_rate"
TOOL_CALL_METRIC = "agentic/tool_call_rate"
TOOL_RESULT_USED_METRIC = "agentic/answer_matches_tool_rate"
"""Per training step (the task's metrics in `metrics.jsonl`): share of episodes answered right, share that called a
tool at least once, and share whose final answer repeats the last tool result."""
_TOOL_RESPONSE_OPEN, _TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"


@attrs.frozen
class AgenticTaskConfig:
    """The agentic task: the generated additions and the tokenizer that renders them."""

    problems: ProblemSpec = attrs.field(factory=ProblemSpec, validator=of_type(ProblemSpec))
    """Which questions, how many, held-out split."""
    tokenizer: str = attrs.field(default=EMBEDDED_TOOLS_TOKENIZER, validator=of_type(str))
    """A tokenizer folder, or "embedded-tools": the embedded tokenizer with the tool tokens and chat template."""
    digit_credit: float = attrs.field(default=0.0, validator=number_in(0, 1, high_open=True))
    """Reward of a wrong final answer for its digits: `digit_credit` x the share of the right answer's digits it
    states in the right place (`digit_match`); 0 keeps the reward binary. A right answer always scores 1.0."""
    call_credit: float = attrs.field(default=0.0, validator=number_in(0, 1, high_open=True))
    """Reward of a wrong final answer when the last tool result was the right answer (the call was right, stating
    it was not); added to the digit credit. `digit_credit + call_credit` must stay below 1.0."""

    def __attrs_post_init__(self) -> None:
        if self.digit_credit + self.call_credit >= 1.0:
            raise ValueError(
                f"task.digit_credit + task.call_credit must be below 1.0 (the reward of a right answer), found "
                f"{self.digit_credit} + {self.call_credit}; lower one of them"
            )


def resolve_tokenizer(spec: str) -> Any:
    """The tokenizer `spec` names: "embedded-tools" is built in code, anything else is a tokenizer folder."""
    return build_embedded_tokenizer(tools=True) if spec == EMBEDDED_TOOLS_TOKENIZER else load_tokenizer(spec)


@cache
def tool_schemas() -> tuple[dict[str, Any], ...]:
    """The OpenAI function schemas the prompt lists (the calculator's, as `LocalToolingEnv` builds it)."""
    return (function_schema(calculator).schema,)


def final_answer(transcript: str) -> str:
    """The episode's final answer: the text after the last `Answer:` of `transcript` (everything after the prompt,
    decoded without special tokens), else the whole transcript; stripped."""
    return transcript.rsplit(ANSWER_PROMPT, 1)[-1].strip()


def last_tool_result(transcript: str) -> str | None:
    """The content of the last `<tool_response>` in `transcript`, or None when no tool answered."""
    if _TOOL_RESPONSE_OPEN not in transcript:
        return None
    return transcript.rsplit(_TOOL_RESPONSE_OPEN, 1)[-1].split(_TOOL_RESPONSE_CLOSE, 1)[0].strip()


def score_transcript(transcript: str, truth: str) -> tuple[float, bool, bool]:
    """(reward 1.0 or 0.0 for the right final answer, whether the model called a tool, whether its answer repeats
    the last tool result)."""
    answer = final_answer(transcript)
    tool = last_tool_result(transcript)
    return float(answer == truth.strip()), TOOL_CALL_OPEN in transcript, tool is not None and answer == tool


def digit_match(answer: str, truth: str) -> float:
    """Share of `truth`'s digits that `answer` states in the same place counted from the right, over the longer of
    the two (so extra or missing digits cost); 0.0 when `answer` is not a number."""
    if not answer.isdigit() or not truth:
        return 0.0
    same = sum(a == b for a, b in zip(reversed(answer), reversed(truth), strict=False))
    return same / max(len(answer), len(truth))


def shaped_reward(transcript: str, truth: str, digit_credit: float, call_credit: float) -> float:
    """1.0 for the right final answer; else `digit_credit` x `digit_match` of the answer plus `call_credit` when the
    last tool result was right (see `AgenticTaskConfig`)."""
    truth = truth.strip()
    answer = final_answer(transcript)
    if answer == truth:
        return 1.0
    called_right = last_tool_result(transcript) == truth
    return digit_credit * digit_match(answer, truth) + call_credit * called_right


class AgenticTask:
    """Encodes rows into chat prompts and scores episode transcripts (see the module doc)."""

    def __init__(self, config: AgenticTaskConfig) -> None:
        self.config = config
        self.tokenizer: Any = resolve_tokenizer(config.tokenizer)

    def prompt_text(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """`messages` rendered with the calculator's schema and the generation prompt."""
        return render(self.tokenizer, messages, tools=tool_schemas())

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        """The prompt of `row`; extras carry its opening messages and the answer."""
        missing = [name for name in (QUESTION_FIELD, ANSWER_FIELD) if name not in row]
        if missing:
            raise ValueError(f"{where}: the agentic task needs the fields {missing}; found {sorted(row)}")
        messages = row.get(MESSAGES_FIELD) or [{"role": "user", "content": str(row[QUESTION_FIELD])}]
        ids = encode(self.tokenizer, self.prompt_text(messages))
        extras = {MESSAGES_FIELD: [dict(m) for m in messages], GROUND_TRUTH_KEY: str(row[ANSWER_FIELD])}
        return PromptItem(tuple(ids), extras)

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        """1.0 for each episode whose final answer is right, else the partial credit the config gives (0.0 by
        default, `shaped_reward`); success, tool-call and answer-matches-tool rates as metrics."""
        scores, successes, calls, matches = [], 0.0, 0, 0
        for sample in samples:
            transcript = self.decode(sample.response_ids)
            truth = str(sample.extras.get(GROUND_TRUTH_KEY, ""))
            success, called, matched = score_transcript(transcript, truth)
            scores.append(shaped_reward(transcript, truth, self.config.digit_credit, self.config.call_credit))
            successes += success
            calls += called
            matches += matched
        count = max(1, len(samples))
        metrics = {
            SUCCESS_METRIC: successes / count,
            TOOL_CALL_METRIC: calls / count,
            TOOL_RESULT_USED_METRIC: matches / count,
        }
        return ScoreResult(tuple(scores), metrics)

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of `token_ids` without special tokens."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)


@attrs.frozen
class AgenticTaskFactory:
    """Builds the `AgenticTask` inside each worker (it pickles: a config only)."""

    config: AgenticTaskConfig

    def __call__(self) -> AgenticTask:
        """The task."""
        return AgenticTask(self.config)
