"""PPO: a critic with a value head estimates values, GAE advantages, clipped policy and value losses (Schulman et al.
2017).

    rl-recipes train ppo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train ppo --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/ppo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name.
"""

from __future__ import annotations

from rl_recipes.recipes._registry import Recipe, expect, register_recipe

RECIPE = register_recipe(
    Recipe(
        name="ppo",
        summary=(
            "PPO: a critic with a value head estimates values, GAE advantages, clipped policy and value losses "
            "(Schulman et al. 2017)."
        ),
        config_file="ppo.yaml",
        checks=(
            expect("pipeline", "ppo", "the pipeline with a critic"),
            expect("algorithm.adv_estimator", "gae", "advantages from the critic's values"),
        ),
    )
)
