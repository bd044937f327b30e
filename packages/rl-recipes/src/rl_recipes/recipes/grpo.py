"""GRPO: group-relative advantages normalised by the group's std, PPO-clip loss, KL to the reference as a loss
(DeepSeekMath).

    rl-recipes train grpo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train grpo --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/grpo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name.
"""

from __future__ import annotations

from rl_recipes.recipes._registry import Recipe, expect, register_recipe

RECIPE = register_recipe(
    Recipe(
        name="grpo",
        summary=(
            "GRPO: group-relative advantages normalised by the group's std, PPO-clip loss, KL to the reference as"
            " a loss (DeepSeekMath)."
        ),
        config_file="grpo.yaml",
        checks=(
            expect("pipeline", "grpo", "the GRPO pipeline"),
            expect("algorithm.adv_estimator", "grpo", "group-relative advantages"),
        ),
    )
)
