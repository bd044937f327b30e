"""Every public module imports in a fresh interpreter; the public API is pinned."""

from __future__ import annotations

import pytest

import rl_runtime
from rl_core.testing import modules_loaded_by_import, public_modules

PUBLIC_API = [
    "ConfigError", "ConfigProblem", "ExtrasFactory", "NodeContext", "NodeResources", "PromptItem", "RLRuntimeError",
    "ResponseSample", "RunConfig", "ScoreResult", "StepData", "Task", "TaskFactory", "TrainResult", "Trainer",
    "TrainerError", "__version__", "config_from_dict", "dump_config", "dump_config_yaml", "load_config",
    "register_operation", "single_input", "with_fields",
]  # fmt: skip


@pytest.mark.parametrize("module", public_modules("rl_runtime"))
def test_public_module_imports_alone(module: str) -> None:
    loaded = modules_loaded_by_import(module)
    assert module in loaded
    optional = {name.split(".")[0] for name in loaded} & {"vllm", "sglang", "megatron"}
    assert not optional, f"{module} imported optional backends eagerly: {sorted(optional)}"


def test_public_api_is_pinned() -> None:
    assert sorted(rl_runtime.__all__) == sorted(PUBLIC_API)
    assert set(PUBLIC_API) <= set(dir(rl_runtime))
    for name in rl_runtime.__all__:
        assert hasattr(rl_runtime, name), name


def test_top_level_names_are_the_subpackages_objects() -> None:
    import rl_runtime.config
    import rl_runtime.nodes
    import rl_runtime.trainer
    import rl_runtime.workers

    for package in (rl_runtime.config, rl_runtime.nodes, rl_runtime.trainer, rl_runtime.workers):
        for name in set(package.__all__) & set(PUBLIC_API):
            assert getattr(rl_runtime, name) is getattr(package, name), name


def test_bare_import_is_light() -> None:
    # The re-exports are imported on first use: `import rl_runtime` alone loads neither Ray nor transformers.
    loaded = {name.split(".")[0] for name in modules_loaded_by_import("rl_runtime")}
    assert not loaded & {"ray", "transformers", "torch"}


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = rl_runtime.no_such_name
