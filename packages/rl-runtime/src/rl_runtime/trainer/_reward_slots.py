"""A reward model on slots of its own (`reward_model.placement: slot`): one Ray actor per slot holds a
`RewardModelScorer`, and each worker that runs the reward node scores through a `RemoteRewardModel`, sending its
rank's samples of a step in one call (token ids with `tokenizer: same`, texts with `retokenize`).

The slots come out of `placement.slots` (`rl_runtime.config._schema_rewards.policy_slots`), reserved in a placement
group of their own beside the policy's; reward-node rank `r` scores on reward-model slot `r % reward_model.slots`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import ray

from rl_engines.reward_model import RewardModelConfig, RewardModelScorer, RewardScores
from rl_runtime.planning._config import SlotGroupConfig
from rl_runtime.planning._placement_groups import SlotGroups, create_slot_groups
from rl_runtime.trainer._errors import TrainerError
from rl_runtime.trainer._remote_reward_model import RemoteRewardModel

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 600.0
"""How long the reward-model workers get to load their model before the run stops."""


class RewardModelServer:
    """One reward model in its own process (the body of a reward-model slot's Ray actor)."""

    def __init__(self, config: RewardModelConfig, device: str) -> None:
        self.scorer = RewardModelScorer.from_config(config, device)

    def ready(self) -> int:
        """The model's parameter count, once it is loaded."""
        return sum(p.numel() for p in self.scorer.model.parameters())

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> RewardScores:
        """`RewardModelScorer.score_ids` on this slot."""
        return self.scorer.score_ids(sequences)

    def score_texts(self, prompts: Sequence[str], responses: Sequence[str]) -> RewardScores:
        """`RewardModelScorer.score_texts` on this slot."""
        return self.scorer.score_texts(prompts, responses)


_RewardModelActor = ray.remote(RewardModelServer)


class RewardSlots:
    """The reward model's slots: a placement group of `config.slots` bundles and one actor in each; `close` undoes
    it. `handles` go to the DAG workers (Ray actor handles pickle)."""

    def __init__(self, groups: SlotGroups, handles: tuple[Any, ...]) -> None:
        self.groups = groups
        self.handles = handles

    @classmethod
    def start(cls, config: RewardModelConfig, device: str, *, use_gpu: bool) -> RewardSlots:
        """Reserve `config.slots` slots (one GPU each with `use_gpu`), start a `RewardModelServer` in each on
        `device` and wait until every one has loaded the model; TrainerError naming `reward_model.path` if one
        fails (the slots are released first)."""
        groups = create_slot_groups(1, config.slots, SlotGroupConfig(use_gpu=use_gpu))
        options = {"num_cpus": 1, "num_gpus": 1 if use_gpu else 0}
        handles = tuple(
            _RewardModelActor.options(**options, scheduling_strategy=groups.strategy_for(slot)).remote(  # pyright: ignore[reportAttributeAccessIssue]
                config, device
            )
            for slot in range(config.slots)
        )
        slots = cls(groups, handles)
        try:
            sizes = ray.get([handle.ready.remote() for handle in handles], timeout=READY_TIMEOUT_S)
        except Exception as error:
            slots.close()
            raise TrainerError(
                f"reward_model.placement=slot: a reward-model slot failed to load reward_model.path={config.path!r} "
                f"({error}); check the folder (`rl-recipes rm` writes one) or use reward_model.placement=colocate"
            ) from error
        logger.info("reward model on %d slot(s) of its own, %d parameters each", len(handles), sizes[0])
        return slots

    def scorer_for(self, rank: int, config: RewardModelConfig, timeout_s: float) -> RemoteRewardModel:
        """The client reward-node rank `rank` scores through (slot `rank % slots`)."""
        return RemoteRewardModel(self.handles[rank % len(self.handles)], config, timeout_s)

    def close(self) -> None:
        """Kill the actors and release their slots; closing twice is harmless."""
        for handle in self.handles:
            ray.kill(handle)
        self.handles = ()
        self.groups.remove()
