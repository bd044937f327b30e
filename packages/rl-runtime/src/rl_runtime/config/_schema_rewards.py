"""Cross-field checks of the model-based rewards (`reward_model`, `judge`) against the pipeline and the rule reward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl_engines.reward_model import RewardModelPlacement
from rl_runtime.config._errors import ConfigProblem
from rl_runtime.config._schema_algorithm import RewardKind
from rl_runtime.config._schema_sections import TORCHRUN_LAUNCHER

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig


def model_reward_sections(config: RunConfig) -> list[str]:
    """Names of the model-based reward sections the run sets."""
    return [name for name in ("reward_model", "judge") if getattr(config, name) is not None]


_MIN_SPLIT_POLICY_SLOTS = 2
"""A split policy placement puts rollout and training on slots of their own."""


def reward_model_slots(config: RunConfig) -> int:
    """Slots the reward model takes from `placement.slots`: `reward_model.slots` with `placement: slot`, else 0."""
    section = config.reward_model
    if section is None or section.placement is not RewardModelPlacement.SLOT:
        return 0
    return section.slots


def policy_slots(config: RunConfig) -> int:
    """Slots the pipeline (rollout, actor, ...) runs on: `placement.slots` less the reward model's own slots."""
    return config.placement.slots - reward_model_slots(config)


def reward_slot_problems(config: RunConfig) -> list[ConfigProblem]:
    """A reward model on its own slots that leaves the policy too few slots, splits a machine, or runs under
    torchrun (which starts no Ray actors for it)."""
    taken = reward_model_slots(config)
    section = config.reward_model
    if not taken:
        if section is not None and section.slots != 1:
            expected = "1 with reward_model.placement=colocate (the reward model runs in every reward-node worker)"
            fix = "remove reward_model.slots, or set reward_model.placement=slot"
            return [ConfigProblem("reward_model.slots", expected, str(section.slots), fix)]
        return []
    if config.trainer.launcher == TORCHRUN_LAUNCHER:
        expected = "'colocate' with trainer.launcher=torchrun: the reward model's own slots are Ray actors"
        fix = "set reward_model.placement=colocate, or trainer.launcher=ray"
        return [ConfigProblem("reward_model.placement", expected, "'slot'", fix)]
    placement = config.placement
    needed = 1 if placement.colocate else _MIN_SPLIT_POLICY_SLOTS
    left = placement.slots - taken
    if left < needed:
        kind = "colocated" if placement.colocate else "split (rollout and training on slots of their own)"
        expected = (
            f"<= placement.slots - {needed} = {placement.slots - needed}: placement.slots={placement.slots} counts "
            f"every slot, the reward model's included, and the {kind} policy needs {needed}"
        )
        fix = f"set placement.slots={taken + needed} (or more), or lower reward_model.slots"
        return [ConfigProblem("reward_model.slots", expected, str(taken), fix)]
    per_node = placement.slots_per_node
    if per_node is not None and left % per_node:
        expected = (
            f"a multiple of placement.slots_per_node={per_node}: the reward model takes whole machines, and the "
            f"policy's {left} slots must fill whole machines too"
        )
        fix = f"set reward_model.slots={per_node}, or leave placement.slots_per_node null (one machine)"
        return [ConfigProblem("reward_model.slots", expected, str(taken), fix)]
    return []


def reward_problems(config: RunConfig) -> list[ConfigProblem]:
    """A model-based reward on an embodied run, a zero rule-reward weight with nothing to replace it, or a reward
    model on its own slots whose slots do not add up."""
    sections = model_reward_sections(config)
    problems = reward_slot_problems(config)
    if config.algorithm.reward is not RewardKind.TASK:
        for name in sections:
            expected = f"null: algorithm.reward={config.algorithm.reward.value!r} scores episodes, not text responses"
            problems.append(ConfigProblem(name, expected, f"a {name} section", "remove it"))
    elif not sections and config.algorithm.rule_reward_weight == 0:
        expected = "> 0 without a reward_model or judge section (the rule reward is then the only reward)"
        fix = "set it back to 1.0, or add a reward_model or judge section"
        problems.append(ConfigProblem("algorithm.rule_reward_weight", expected, "0", fix))
    return problems
