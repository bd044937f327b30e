"""The recipe registry: each recipe module registers its name, summary, default config, its own checks and the
function that wires and runs it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rl_core import lookup, registrar
from rl_runtime.config import ConfigError, ConfigProblem

Check = Callable[[object], list[ConfigProblem]]
RunFn = Callable[[Any], Any]
"""A recipe's `run(config: RecipeConfig) -> RecipeResult`: its task, pipeline and Trainer wired together."""


@dataclass(frozen=True)
class Recipe:
    """A named recipe: what it trains and how, the packaged config it starts from, and its consistency checks."""

    name: str
    summary: str
    config_file: str
    """File name of its default config in `rl_recipes/configs/` (the embedded default)."""
    run: RunFn
    """Runs the recipe on a `RecipeConfig` (its module's `run`); `run_recipe` calls it."""
    checks: tuple[Check, ...] = ()
    """Each returns the problems of a config that does not run this recipe (e.g. the wrong estimator)."""
    config_class: type[Any] | None = None
    """The config class its file loads into; None: `RecipeConfig` (a run config plus the math task)."""

    def check(self, config: object) -> None:
        """Raise ConfigError listing every setting that contradicts this recipe."""
        problems = [problem for check in self.checks for problem in check(config)]
        if problems:
            raise ConfigError(problems)


RECIPES: dict[str, Recipe] = {}
"""Recipe name -> Recipe."""

_register = registrar(RECIPES, "recipe")


def register_recipe(recipe: Recipe) -> Recipe:
    """Add `recipe` to RECIPES under its name."""
    _register(recipe.name)(recipe)
    return recipe


def get_recipe(name: str) -> Recipe:
    """The registered recipe `name`; an unknown name lists the valid ones and the nearest."""
    return lookup(RECIPES, name, "recipe")


def expect(path: str, wanted: object, why: str) -> Check:
    """A check that the dotted setting `path` equals `wanted` (the recipe's defining choice)."""

    def check(config: object) -> list[ConfigProblem]:
        value: object = config
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
        found = getattr(value, "value", value)
        if found != wanted:
            return [
                ConfigProblem(path, f"{wanted!r} ({why})", repr(found), f"set {path}={wanted} or pick another recipe")
            ]
        return []

    return check
