"""Dr. GRPO: GRPO without the std normalisation and with a length-unbiased loss (Liu et al. 2025, arXiv:2503.20783).

    rl-recipes train dr_grpo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train dr_grpo --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/dr_grpo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name.
"""

from __future__ import annotations

from rl_recipes.recipes._registry import Recipe, expect, register_recipe

RECIPE = register_recipe(
    Recipe(
        name="dr_grpo",
        summary=(
            "Dr. GRPO: GRPO without the std normalisation and with a length-unbiased loss (Liu et al. 2025, "
            "arXiv:2503.20783)."
        ),
        config_file="dr_grpo.yaml",
        checks=(
            expect("pipeline", "grpo", "the GRPO pipeline"),
            expect("algorithm.adv_estimator", "grpo", "group-relative advantages"),
            expect("algorithm.adv_params.norm_by_std", False, "no std normalisation"),
            expect("algorithm.loss_agg_mode", "seq-mean-token-sum-norm", "the length-unbiased aggregation"),
        ),
    )
)
