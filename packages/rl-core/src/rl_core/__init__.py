"""rl-core: torch-only algorithms for RL post-training and the TaskGraph types."""

from rl_core._errors import DuplicateNameError, RLCoreError, ShapeError, UnknownNameError

__version__ = "0.1.0"

__all__ = [
    "DuplicateNameError",
    "RLCoreError",
    "ShapeError",
    "UnknownNameError",
    "__version__",
]
