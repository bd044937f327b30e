"""rl-runtime: Ray multi-controller execution of RL pipelines."""

from rl_runtime._errors import RLRuntimeError

__version__ = "0.1.0"

__all__ = ["RLRuntimeError", "__version__"]
