"""The task seam: how a dataset row becomes a prompt and how responses are scored.

The runtime knows tokens, not text; a task (supplied by a recipe) owns the tokenizer, the prompt template and
the reward function, so the same node operations serve math, code or any other task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs


@attrs.frozen
class PromptItem:
    """One prompt as the rollout engine takes it, and what scoring it will need later."""

    prompt_ids: tuple[int, ...]
    """Token ids of the prompt."""
    extras: Mapping[str, Any] = attrs.field(factory=dict)
    """Per-prompt values the score needs (ground truth, test cases); copied to each of the prompt's samples."""


@attrs.frozen
class ResponseSample:
    """One generated response, as a task scores it."""

    uid: int
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    finish_reason: str
    """"stop", "length" or "abort" (the engine's FinishReason)."""
    extras: Mapping[str, Any]


@attrs.frozen
class ScoreResult:
    """Scores in sample order and the task's own metrics (failure counts, format rates, ...)."""

    scores: tuple[float, ...]
    metrics: Mapping[str, float] = attrs.field(factory=dict)


@runtime_checkable
class Task(Protocol):
    """Encodes dataset rows into prompts and scores responses."""

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        """The prompt of `row`; errors name `where` (file and row index) and the missing or bad field."""
        ...

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        """One finite score per sample; per-sample reward failures are counted in the metrics, not raised."""
        ...

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of `token_ids` (for logs and validation samples)."""
        ...


TaskFactory = Callable[[], Task]
"""Builds the task inside a worker process; it must pickle (a top-level class instance or function)."""
