"""REINFORCE++: reward-to-go whitened over the batch, PPO-clip loss, no critic (Hu 2025, arXiv:2501.03262).

    rl-recipes train reinforce_plus_plus                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train reinforce_plus_plus --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/reinforce_plus_plus.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name.
"""

from __future__ import annotations

from rl_recipes.recipes._registry import Recipe, expect, register_recipe

RECIPE = register_recipe(
    Recipe(
        name="reinforce_plus_plus",
        summary=(
            "REINFORCE++: reward-to-go whitened over the batch, PPO-clip loss, no critic (Hu 2025, arXiv:2501.03262)."
        ),
        config_file="reinforce_plus_plus.yaml",
        checks=(
            expect("pipeline", "grpo", "the critic-free pipeline"),
            expect("algorithm.adv_estimator", "reinforce_plus_plus", "batch-whitened returns"),
        ),
    )
)
