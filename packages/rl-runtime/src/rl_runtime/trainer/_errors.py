"""The errors of the training loop."""

from __future__ import annotations

from rl_runtime._errors import RLRuntimeError


class TrainerError(RLRuntimeError):
    """The run cannot start or continue as configured; the message names the setting and the fix."""


class CheckpointStateError(TrainerError):
    """A checkpoint folder is incomplete, unreadable, or from a different run layout."""
