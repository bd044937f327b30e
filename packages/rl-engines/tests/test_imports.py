"""Every public module imports in a fresh interpreter; the public API is pinned."""

from __future__ import annotations

import pytest

import rl_engines
from rl_core.testing import modules_loaded_by_import, public_modules

PUBLIC_API = ["EngineError", "__version__", "load_tokenizer"]


@pytest.mark.parametrize("module", public_modules("rl_engines"))
def test_public_module_imports_alone(module: str) -> None:
    loaded = modules_loaded_by_import(module)
    assert module in loaded
    optional = {name.split(".")[0] for name in loaded} & {"vllm", "sglang", "megatron"}
    assert not optional, f"{module} imported optional backends eagerly: {sorted(optional)}"


def test_public_api_is_pinned() -> None:
    assert sorted(rl_engines.__all__) == sorted(PUBLIC_API)
    for name in rl_engines.__all__:
        assert hasattr(rl_engines, name), name
