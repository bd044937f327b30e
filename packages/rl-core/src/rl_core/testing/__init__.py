"""Test helpers shipped with rl-core so every package checks its imports, and drives envs, the same way."""

from rl_core.testing._env_conformance import check_vector_env
from rl_core.testing._envs import TOY_TASKS, ToyEpisodeEnv, make_toy_env, toy_spec
from rl_core.testing._imports import modules_loaded_by_import, public_modules, third_party
from rl_core.testing._tool_conformance import ToolCall, acheck_tooling_env, check_tooling_env
from rl_core.testing._tools import ToyToolingEnv

__all__ = [
    "TOY_TASKS",
    "ToolCall",
    "ToyEpisodeEnv",
    "ToyToolingEnv",
    "acheck_tooling_env",
    "check_tooling_env",
    "check_vector_env",
    "make_toy_env",
    "modules_loaded_by_import",
    "public_modules",
    "third_party",
    "toy_spec",
]
