"""Finding and loading a recipe's config: the packaged default, or a user file, plus dotted overrides."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._registry import get_recipe
from rl_runtime.config import load_config

CONFIGS_PACKAGE = "rl_recipes"
CONFIGS_FOLDER = "configs"


def config_path(file_name: str) -> Path:
    """The packaged config `file_name` (e.g. "grpo.yaml")."""
    return Path(str(resources.files(CONFIGS_PACKAGE) / CONFIGS_FOLDER / file_name))


def load_recipe_config(recipe: str, config_file: str | Path | None = None, overrides: Sequence[str] = ()) -> Any:
    """Recipe `recipe`'s config (its `config_class`, default `RecipeConfig`) from `config_file` (default: its
    packaged one) with `overrides` applied."""
    entry = get_recipe(recipe)
    path = Path(config_file) if config_file is not None else config_path(entry.config_file)
    return load_config(entry.config_class or RecipeConfig, path, overrides)
