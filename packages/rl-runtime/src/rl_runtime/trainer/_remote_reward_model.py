"""The reward-node side of `reward_model.placement: slot`: a scorer whose calls run on a reward-model slot's Ray
actor. Ray is imported only when a call is made, so importing this module (as every worker's state does) loads no
Ray module in a torchrun rank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl_engines.reward_model import RewardModelConfig, RewardScores


class RemoteRewardModel:
    """A `rl_engines.reward_model.RewardScorer` whose calls run on a reward-model slot (a Ray actor handle); each
    call waits at most `timeout_s` (the run's step timeout), so a dead or hung slot fails the step, never hangs it."""

    def __init__(self, handle: Any, config: RewardModelConfig, timeout_s: float) -> None:
        self.handle = handle
        self._config = config
        self.timeout_s = timeout_s

    @property
    def config(self) -> RewardModelConfig:
        """The reward model's config section."""
        return self._config

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> RewardScores:
        """One score per token-id sequence, computed on the reward-model slot."""
        rows = [list(ids) for ids in sequences]
        import ray  # a torchrun rank never scores on a slot, and imports no Ray

        return ray.get(self.handle.score_ids.remote(rows), timeout=self.timeout_s)

    def score_texts(self, prompts: Sequence[str], responses: Sequence[str]) -> RewardScores:
        """One score per `prompt + response` text, encoded and computed on the reward-model slot."""
        import ray  # a torchrun rank never scores on a slot, and imports no Ray

        return ray.get(self.handle.score_texts.remote(list(prompts), list(responses)), timeout=self.timeout_s)
