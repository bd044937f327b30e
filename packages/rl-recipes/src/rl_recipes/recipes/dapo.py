"""DAPO: GRPO with dynamic sampling (groups whose rewards vary, refilled by more draws), clip-higher, token-mean loss
and overlong shaping (Yu et al. 2025, arXiv:2503.14476).

    rl-recipes train dapo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train dapo --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/dapo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name. `run` is the whole run: checks and warm start, the task, the
Trainer over the pipeline, then the summary.
"""

from __future__ import annotations

from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._registry import Recipe, expect, register_recipe
from rl_recipes.recipes._run import RecipeResult, finish_run, start_run
from rl_recipes.tasks import MathTaskFactory
from rl_runtime.trainer import Trainer

PIPELINE = "dapo"
"""The pipeline it runs (rl-core's `dapo`: GRPO with dynamic sampling of informative groups)."""
CHECKS = (
    expect("pipeline", PIPELINE, "the pipeline with dynamic sampling"),
    expect("algorithm.adv_estimator", "grpo", "group-relative advantages"),
    expect("algorithm.loss_agg_mode", "token-mean", "DAPO's token-level loss"),
)


def run(config: RecipeConfig) -> RecipeResult:
    """Train `config`: the warm start, the math task, the Trainer over `PIPELINE`, then the run's summary."""
    start_run(RECIPE, config)  # the checks, the warm start when its model is missing, the run folder's config.yaml
    task = MathTaskFactory(config.task, str(config.tokenizer_path))  # each worker builds it: prompts, rule reward
    result = Trainer(config, task).fit()  # rollouts, rewards, updates, validation and checkpoints
    return finish_run(RECIPE, config, result)  # held-out reward before and after, reward curve, summary.json


RECIPE = register_recipe(
    Recipe(
        name="dapo",
        summary=(
            "DAPO: GRPO with dynamic sampling (groups whose rewards vary, refilled by more draws), clip-higher, "
            "token-mean loss and overlong shaping (Yu et al. 2025, arXiv:2503.14476)."
        ),
        config_file="dapo.yaml",
        run=run,
        checks=CHECKS,
    )
)
