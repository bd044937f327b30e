"""Turnkey recipes: GRPO, Dr. GRPO, RLOO, REINFORCE++, PPO, DAPO (and the SFT warm start), each a module that
registers what it trains, its packaged default config and the checks that keep a config true to its name.

    config = load_recipe_config("grpo", overrides=["trainer.total_steps=10"])
    result = run_recipe(get_recipe("grpo"), config)
"""

from rl_recipes.recipes import dapo, dr_grpo, grpo, ppo, reinforce_plus_plus, rloo, sft
from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._loading import config_path, load_recipe_config
from rl_recipes.recipes._registry import RECIPES, Recipe, expect, get_recipe, register_recipe
from rl_recipes.recipes._run import CURVE_FILE, SUMMARY_FILE, RecipeResult, prepare_warm_start, run_recipe

__all__ = [
    "CURVE_FILE",
    "RECIPES",
    "SUMMARY_FILE",
    "Recipe",
    "RecipeConfig",
    "RecipeResult",
    "config_path",
    "dapo",
    "dr_grpo",
    "expect",
    "get_recipe",
    "grpo",
    "load_recipe_config",
    "ppo",
    "prepare_warm_start",
    "register_recipe",
    "reinforce_plus_plus",
    "rloo",
    "run_recipe",
    "sft",
]
