"""GRPO: group-relative advantages normalised by the group's std, PPO-clip loss (DeepSeekMath).

DeepSeekMath adds a KL-to-reference loss; the packaged config leaves it off (`algorithm.kl: {mode: none}`), as
verl's GRPO examples on small models often do, so no reference model is built. Turn it on with
`algorithm.kl.mode=as_loss algorithm.kl.coef=0.001`.

    rl-recipes train grpo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train grpo --config my.yaml actor.optimizer.lr=1e-6

The packaged `configs/grpo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name. `run` is the whole run: checks and warm start, the task, the
Trainer over the pipeline, then the summary.
"""

from __future__ import annotations

from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._registry import Recipe, expect, register_recipe
from rl_recipes.recipes._run import RecipeResult, finish_run, start_run
from rl_recipes.tasks import MathTaskFactory
from rl_runtime.trainer import Trainer

PIPELINE = "grpo"
"""The pipeline it runs (rl-core's `grpo`: generate, reward, advantages, old and reference log-probs, actor update)."""
CHECKS = (
    expect("pipeline", PIPELINE, "the GRPO pipeline"),
    expect("algorithm.adv_estimator", "grpo", "group-relative advantages"),
)


def run(config: RecipeConfig) -> RecipeResult:
    """Train `config`: the warm start, the math task, the Trainer over `PIPELINE`, then the run's summary."""
    start_run(RECIPE, config)  # the checks, the warm start when its model is missing, the run folder's config.yaml
    task = MathTaskFactory(config.task, str(config.tokenizer_path))  # each worker builds it: prompts, rule reward
    result = Trainer(config, task).fit()  # rollouts, rewards, updates, validation and checkpoints
    return finish_run(RECIPE, config, result)  # held-out reward before and after, reward curve, summary.json


RECIPE = register_recipe(
    Recipe(
        name="grpo",
        summary=(
            "GRPO: group-relative advantages normalised by the group's std, PPO-clip loss (DeepSeekMath); the KL"
            " loss is off (algorithm.kl.mode=as_loss turns it on)."
        ),
        config_file="grpo.yaml",
        run=run,
        checks=CHECKS,
    )
)
