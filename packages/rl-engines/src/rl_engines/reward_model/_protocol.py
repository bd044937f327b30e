"""`RewardScorer`: what the reward node needs of a reward model, whether it runs in the node's worker or elsewhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rl_engines.reward_model._config import RewardModelConfig
from rl_engines.reward_model._scorer import RewardScores


@runtime_checkable
class RewardScorer(Protocol):
    """Scores prompt + response sequences with a one-label reward model. `RewardModelScorer` is the in-process one;
    the runtime's client of a reward model on its own slot (`reward_model.placement: slot`) is another."""

    @property
    def config(self) -> RewardModelConfig:
        """The reward model's config section."""
        ...

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> RewardScores:
        """One score per token-id sequence, in input order."""
        ...

    def score_texts(self, prompts: Sequence[str], responses: Sequence[str]) -> RewardScores:
        """One score per `prompt + response` text, encoded with the reward model's own tokenizer."""
        ...
