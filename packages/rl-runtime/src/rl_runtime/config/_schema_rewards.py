"""Cross-field checks of the model-based rewards (`reward_model`, `judge`) against the pipeline and the rule reward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl_runtime.config._errors import ConfigProblem
from rl_runtime.config._schema_algorithm import RewardKind

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig


def model_reward_sections(config: RunConfig) -> list[str]:
    """Names of the model-based reward sections the run sets."""
    return [name for name in ("reward_model", "judge") if getattr(config, name) is not None]


def reward_problems(config: RunConfig) -> list[ConfigProblem]:
    """A model-based reward on an embodied run, or a zero rule-reward weight with nothing to replace it."""
    sections = model_reward_sections(config)
    problems = []
    if config.algorithm.reward is not RewardKind.TASK:
        for name in sections:
            expected = f"null: algorithm.reward={config.algorithm.reward.value!r} scores episodes, not text responses"
            problems.append(ConfigProblem(name, expected, f"a {name} section", "remove it"))
    elif not sections and config.algorithm.rule_reward_weight == 0:
        expected = "> 0 without a reward_model or judge section (the rule reward is then the only reward)"
        fix = "set it back to 1.0, or add a reward_model or judge section"
        problems.append(ConfigProblem("algorithm.rule_reward_weight", expected, "0", fix))
    return problems
