"""rl-runtime: Ray multi-controller execution of RL pipelines.

What a user needs to configure and run training, and to plug in their own task and node operations:

    config = load_config(RunConfig, "grpo.yaml", ["actor.optimizer.lr=1e-6"])
    result = Trainer(config, MyTaskFactory()).fit()

`Task`/`TaskFactory` (with `PromptItem`, `ResponseSample`, `ScoreResult`) is the recipe's seam;
`register_operation` binds a custom node operation, which takes a `NodeContext[NodeResources]` and returns
`StepData`. The subpackages (`rl_runtime.config`, `.nodes`, `.workers`, `.trainer`, `.metrics`, `.planning`,
`.roles`, `.evaluation`) hold what a user extends there. These names are imported on first use, so a bare
`import rl_runtime` loads neither Ray nor transformers.
"""

from __future__ import annotations

from rl_runtime._errors import RLRuntimeError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat the name as True

if TYPE_CHECKING:
    from rl_runtime.config import (
        ConfigError,
        ConfigProblem,
        RunConfig,
        config_from_dict,
        dump_config,
        dump_config_yaml,
        load_config,
    )
    from rl_runtime.nodes import (
        NodeResources,
        PromptItem,
        ResponseSample,
        ScoreResult,
        Task,
        TaskFactory,
        single_input,
        with_fields,
    )
    from rl_runtime.trainer import ExtrasFactory, Trainer, TrainerError, TrainResult
    from rl_runtime.workers import NodeContext, StepData, register_operation

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "ConfigError",
            "ConfigProblem",
            "RunConfig",
            "config_from_dict",
            "dump_config",
            "dump_config_yaml",
            "load_config",
        ],
        "rl_runtime.config",
    ),
    **dict.fromkeys(
        [
            "NodeResources",
            "PromptItem",
            "ResponseSample",
            "ScoreResult",
            "Task",
            "TaskFactory",
            "single_input",
            "with_fields",
        ],
        "rl_runtime.nodes",
    ),
    **dict.fromkeys(["ExtrasFactory", "TrainResult", "Trainer", "TrainerError"], "rl_runtime.trainer"),
    **dict.fromkeys(["NodeContext", "StepData", "register_operation"], "rl_runtime.workers"),
}

__all__ = [
    "ConfigError",
    "ConfigProblem",
    "ExtrasFactory",
    "NodeContext",
    "NodeResources",
    "PromptItem",
    "RLRuntimeError",
    "ResponseSample",
    "RunConfig",
    "ScoreResult",
    "StepData",
    "Task",
    "TaskFactory",
    "TrainResult",
    "Trainer",
    "TrainerError",
    "__version__",
    "config_from_dict",
    "dump_config",
    "dump_config_yaml",
    "load_config",
    "register_operation",
    "single_input",
    "with_fields",
]


def __getattr__(name: str) -> object:
    """Import a re-exported name from its subpackage on first use (and cache it in this module)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes, the lazily imported re-exports included."""
    return sorted(set(globals()) | set(__all__))
