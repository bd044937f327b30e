"""ReMax: each sample's baseline is the reward of a greedy response to its prompt (Li et al. 2023).

    rl-recipes train remax                      # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train remax --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/remax.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name. `run` is the whole run: checks and warm start, the task, the
Trainer over the pipeline, then the summary.
"""

from __future__ import annotations

from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._registry import Recipe, expect, register_recipe
from rl_recipes.recipes._run import RecipeResult, finish_run, start_run
from rl_recipes.tasks import MathTaskFactory
from rl_runtime.trainer import Trainer

PIPELINE = "remax"
"""The pipeline it runs (rl-core's `remax`: GRPO's flow plus a `greedy_baseline` node after the reward, which samples
one greedy response per prompt and scores it)."""
CHECKS = (
    expect("pipeline", PIPELINE, "the pipeline with the greedy-baseline node"),
    expect("algorithm.adv_estimator", "remax", "reward minus the greedy response's reward"),
)


def run(config: RecipeConfig) -> RecipeResult:
    """Train `config`: the warm start, the math task, the Trainer over `PIPELINE`, then the run's summary."""
    start_run(RECIPE, config)  # the checks, the warm start when its model is missing, the run folder's config.yaml
    task = MathTaskFactory(config.task, str(config.tokenizer_path))  # each worker builds it: prompts, rule reward
    result = Trainer(config, task).fit()  # rollouts, rewards, updates, validation and checkpoints
    return finish_run(RECIPE, config, result)  # held-out reward before and after, reward curve, summary.json


RECIPE = register_recipe(
    Recipe(
        name="remax",
        summary="ReMax: each sample's baseline is the reward of a greedy response to its prompt (Li et al. 2023).",
        config_file="remax.yaml",
        run=run,
        checks=CHECKS,
    )
)
