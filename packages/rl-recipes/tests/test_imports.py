"""Every public module imports in a fresh interpreter; the public API is pinned."""

from __future__ import annotations

import pytest

import rl_recipes
from rl_core.testing import modules_loaded_by_import, public_modules

PUBLIC_API = ["RecipeError", "__version__"]


@pytest.mark.parametrize("module", public_modules("rl_recipes"))
def test_public_module_imports_alone(module: str) -> None:
    loaded = modules_loaded_by_import(module)
    assert module in loaded
    optional = {name.split(".")[0] for name in loaded} & {"vllm", "sglang", "megatron"}
    assert not optional, f"{module} imported optional backends eagerly: {sorted(optional)}"


def test_public_api_is_pinned() -> None:
    assert sorted(rl_recipes.__all__) == sorted(PUBLIC_API)
    for name in rl_recipes.__all__:
        assert hasattr(rl_recipes, name), name


def test_cli_public_api_is_pinned() -> None:
    import rl_recipes.cli

    assert sorted(rl_recipes.cli.__all__) == ["build_parser", "config_reference", "main"]
