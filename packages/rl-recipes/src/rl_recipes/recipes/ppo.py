"""PPO: a critic with a value head estimates values, GAE advantages, clipped policy and value losses (Schulman et al.
2017).

    rl-recipes train ppo                       # the embedded default: tiny model, CPU, a few minutes
    rl-recipes train ppo --config my.yaml actor.optimizer.lr=1e-6
    rl-recipes train ppo algorithm.kl.mode=in_reward algorithm.kl.coef=0.001   # the KL in the reward, as verl's

The packaged `configs/ppo.yaml` spells out every setting; the checks below refuse a config that would
silently run another algorithm under this name. `run` is the whole run: checks and warm start, the task, the
Trainer over the pipeline, then the summary.
"""

from __future__ import annotations

from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._registry import Recipe, expect, register_recipe
from rl_recipes.recipes._run import RecipeResult, finish_run, start_run
from rl_recipes.tasks import MathTaskFactory
from rl_runtime.trainer import Trainer

PIPELINE = "ppo"
"""The pipeline it runs (rl-core's `ppo`: the critic-free one plus critic values and critic updates)."""
CHECKS = (
    expect("pipeline", PIPELINE, "the pipeline with a critic"),
    expect("algorithm.adv_estimator", "gae", "advantages from the critic's values"),
)


def run(config: RecipeConfig) -> RecipeResult:
    """Train `config`: the warm start, the math task, the Trainer over `PIPELINE`, then the run's summary."""
    start_run(RECIPE, config)  # the checks, the warm start when its model is missing, the run folder's config.yaml
    task = MathTaskFactory(config.task, str(config.tokenizer_path))  # each worker builds it: prompts, rule reward
    result = Trainer(config, task).fit()  # rollouts, rewards, updates, validation and checkpoints
    return finish_run(RECIPE, config, result)  # held-out reward before and after, reward curve, summary.json


RECIPE = register_recipe(
    Recipe(
        name="ppo",
        summary=(
            "PPO: a critic with a value head estimates values, GAE advantages, clipped policy and value losses "
            "(Schulman et al. 2017)."
        ),
        config_file="ppo.yaml",
        run=run,
        checks=CHECKS,
    )
)
