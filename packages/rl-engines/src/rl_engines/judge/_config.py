"""`JudgeConfig`: which engine judges, the prompt it gets and how its verdict becomes a score."""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

from rl_engines.training import TrainConfigError

_OWNER = "JudgeConfig"
DEFAULT_TEMPLATE = "Question: {prompt}\nResponse: {response}\nIs the response correct? Answer yes or no.\nVerdict:"
"""The judge's prompt; `{prompt}` and `{response}` are the decoded texts of the sample."""
YES_NO_PATTERN = r"\b(yes|no)\b"
"""The default verdict of `verdict: yes_no`: the first "yes" or "no" (any case) in the judge's output."""
NUMBER_PATTERN = r"-?\d+(?:\.\d+)?"
"""The default verdict of `verdict: number`: the first number in the judge's output."""


class JudgeEngine(enum.Enum):
    """Which rollout engine answers the judge's prompts."""

    ROLLOUT = "rollout"
    """The run's own rollout engine (the policy judges itself, in the reward node's worker)."""
    SERVER = "server"
    """A rollout server at `base_url` (ours or SGLang's native protocol), through `rl_engines.remote.RemoteEngine`."""


class VerdictKind(enum.Enum):
    """How the judge's output text becomes a score."""

    YES_NO = "yes_no"
    """1.0 for "yes", 0.0 for "no" (the first group of `pattern`, any case)."""
    NUMBER = "number"
    """The number `pattern` matches (its first group when it has one)."""


def _invalid(name: str, expected: str, found: object, fix: str = "") -> TrainConfigError:
    text = f"{_OWNER}.{name} must be {expected}, got {found!r}"
    return TrainConfigError(f"{text}; {fix}" if fix else text, field=name, expected=expected, found=found, fix=fix)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class JudgeConfig:
    """A generative judge: a rollout engine reads `template` filled with the sample's prompt and response, and the
    verdict parsed from its answer (times `weight`) joins the sequence score. An answer with no verdict scores
    `default_score` and is counted in `reward/judge_unparsed_frac`."""

    engine: JudgeEngine = JudgeEngine.ROLLOUT
    """"rollout" (the run's own engine) or "server" (a rollout server at `base_url`)."""
    base_url: str | None = None
    """`http://host:port` of the judge's server; required by engine=server, null otherwise."""
    tokenizer: str | None = None
    """The judge model's tokenizer folder; null: the policy's (its `tokenizer_path`, else its model folder)."""
    template: str = DEFAULT_TEMPLATE
    """The judge's prompt, with `{prompt}` and `{response}` (the sample's decoded texts)."""
    verdict: VerdictKind = VerdictKind.YES_NO
    """"yes_no" (yes -> 1.0, no -> 0.0) or "number" (the number found)."""
    pattern: str | None = None
    """A regular expression (searched, case-insensitive) that finds the verdict; its first group when it has one.
    Null: `YES_NO_PATTERN` or `NUMBER_PATTERN`."""
    default_score: float = 0.0
    """The score of an answer in which `pattern` finds no verdict."""
    max_new_tokens: int = 8
    """The judge's answer budget in tokens."""
    temperature: float = 0.0
    """The judge's sampling temperature (0: greedy)."""
    weight: float = 1.0
    """Multiplies the verdict before it joins the sequence score."""

    def __post_init__(self) -> None:
        if not isinstance(self.engine, JudgeEngine):
            raise _invalid("engine", "'rollout' or 'server'", self.engine)
        if self.engine is JudgeEngine.SERVER and not self.base_url:
            raise _invalid("base_url", "an http://host:port address with engine=server", self.base_url)
        if self.engine is JudgeEngine.ROLLOUT and self.base_url is not None:
            raise _invalid("base_url", "null with engine=rollout", self.base_url, "set engine=server or remove it")
        if not isinstance(self.template, str) or "{response}" not in self.template:
            raise _invalid("template", "a str with a {response} placeholder", self.template)
        try:
            self.template.format(prompt="", response="")
        except (KeyError, IndexError, ValueError) as error:
            raise _invalid("template", "placeholders {prompt} and {response} only", self.template, str(error)) from None
        if not isinstance(self.verdict, VerdictKind):
            raise _invalid("verdict", "'yes_no' or 'number'", self.verdict)
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as error:
                raise _invalid("pattern", "a valid regular expression", self.pattern, str(error)) from None
        for name in ("default_score", "weight"):
            if not _finite(getattr(self, name)):
                raise _invalid(name, "a finite number", getattr(self, name))
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise _invalid("max_new_tokens", "an int >= 1", self.max_new_tokens)
        if not _finite(self.temperature) or self.temperature < 0:
            raise _invalid("temperature", "a finite number >= 0", self.temperature)

    @property
    def verdict_pattern(self) -> re.Pattern[str]:
        """The compiled verdict pattern (case-insensitive)."""
        default = YES_NO_PATTERN if self.verdict is VerdictKind.YES_NO else NUMBER_PATTERN
        return re.compile(self.pattern or default, re.IGNORECASE)
