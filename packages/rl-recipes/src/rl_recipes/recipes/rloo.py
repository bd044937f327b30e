"""RLOO: each sample's baseline is the mean reward of the other samples of its prompt (Ahmadian et al. 2024).

    rl-recipes train rloo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train rloo --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/rloo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name.
"""

from __future__ import annotations

from rl_recipes.recipes._registry import Recipe, expect, register_recipe

RECIPE = register_recipe(
    Recipe(
        name="rloo",
        summary=(
            "RLOO: each sample's baseline is the mean reward of the other samples of its prompt (Ahmadian et al. 2024)."
        ),
        config_file="rloo.yaml",
        checks=(
            expect("pipeline", "grpo", "the critic-free pipeline"),
            expect("algorithm.adv_estimator", "rloo", "leave-one-out advantages"),
        ),
    )
)
