"""Test doubles shipped with rl-runtime: the embodied seam without a simulator or a VLA."""

from rl_runtime.testing._embodied import (
    LAST_FRAME,
    TOY_ENV,
    LastFrameEmbedder,
    RandomPolicy,
    WordTask,
    register_embodied_doubles,
)

__all__ = [
    "LAST_FRAME",
    "TOY_ENV",
    "LastFrameEmbedder",
    "RandomPolicy",
    "WordTask",
    "register_embodied_doubles",
]
