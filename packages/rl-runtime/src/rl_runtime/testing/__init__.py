"""Test doubles shipped with rl-runtime: the embodied seam without a simulator or a VLA."""

from rl_runtime.testing._embodied import (
    CORRIDOR,
    LAST_FRAME,
    CorridorEnv,
    LastFrameEmbedder,
    RandomPolicy,
    WordTask,
    register_embodied_doubles,
)

__all__ = [
    "CORRIDOR",
    "LAST_FRAME",
    "CorridorEnv",
    "LastFrameEmbedder",
    "RandomPolicy",
    "WordTask",
    "register_embodied_doubles",
]
