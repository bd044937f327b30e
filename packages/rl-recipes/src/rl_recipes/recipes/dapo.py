"""DAPO: GRPO with dynamic sampling (groups whose rewards vary, refilled by more draws), clip-higher, token-mean loss
and overlong shaping (Yu et al. 2025, arXiv:2503.14476).

    rl-recipes train dapo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train dapo --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/dapo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name.
"""

from __future__ import annotations

from rl_recipes.recipes._registry import Recipe, expect, register_recipe

RECIPE = register_recipe(
    Recipe(
        name="dapo",
        summary=(
            "DAPO: GRPO with dynamic sampling (groups whose rewards vary, refilled by more draws), clip-higher, "
            "token-mean loss and overlong shaping (Yu et al. 2025, arXiv:2503.14476)."
        ),
        config_file="dapo.yaml",
        checks=(
            expect("pipeline", "dapo", "the pipeline with dynamic sampling"),
            expect("algorithm.adv_estimator", "grpo", "group-relative advantages"),
            expect("algorithm.loss_agg_mode", "token-mean", "DAPO's token-level loss"),
        ),
    )
)
