"""Turnkey recipes: GRPO, Dr. GRPO, RLOO, REINFORCE++, ReMax, PPO, DAPO, SRPO, agentic GRPO (tool calling), and the
SFT warm start, each a module that reads as the wiring of its run: the pipeline it runs, the checks that keep a
config true to its name, and `run`, which calls the shared `start_run` (checks, warm start, run folder), builds the
task and the Trainer, and ends with `finish_run` (held-out lift, reward curve, summary); SRPO and agentic run their
own warm start and report. Each registers itself with its packaged default config.

    config = load_recipe_config("grpo", overrides=["trainer.total_steps=10"])
    result = run_recipe(get_recipe("grpo"), config)     # or: grpo.run(config)
"""

from rl_recipes.recipes import agentic, dapo, dr_grpo, grpo, ppo, reinforce_plus_plus, remax, rloo, sft, srpo
from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._loading import config_path, load_recipe_config
from rl_recipes.recipes._registry import RECIPES, Recipe, expect, get_recipe, register_recipe
from rl_recipes.recipes._run import (
    CURVE_FILE,
    SUMMARY_FILE,
    RecipeResult,
    finish_run,
    prepare_warm_start,
    run_recipe,
    start_run,
)

__all__ = [
    "CURVE_FILE",
    "RECIPES",
    "SUMMARY_FILE",
    "Recipe",
    "RecipeConfig",
    "RecipeResult",
    "agentic",
    "config_path",
    "dapo",
    "dr_grpo",
    "expect",
    "finish_run",
    "get_recipe",
    "grpo",
    "load_recipe_config",
    "ppo",
    "prepare_warm_start",
    "register_recipe",
    "reinforce_plus_plus",
    "remax",
    "rloo",
    "run_recipe",
    "sft",
    "srpo",
    "start_run",
]
