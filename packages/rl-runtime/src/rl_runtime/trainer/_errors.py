"""The errors of the training loop."""

from __future__ import annotations

from rl_runtime._errors import RLRuntimeError


class TrainerError(RLRuntimeError):
    """The run cannot start or continue as configured; the message names the setting and the fix."""


class CheckpointStateError(TrainerError):
    """A checkpoint folder is incomplete, unreadable, or from a different run layout."""


class TrainingInterrupted(TrainerError):
    """SIGINT or SIGTERM stopped the run; the message says what was saved and how to resume.

    `signal_number` is the signal, `step` the steps done (and saved, unless `abandoned`), `checkpoint` the newest
    committed checkpoint (None when there is none)."""

    def __init__(self, message: str, *, signal_number: int, step: int, checkpoint: object, abandoned: bool) -> None:
        super().__init__(message)
        self.signal_number = signal_number
        self.step = step
        self.checkpoint = checkpoint
        self.abandoned = abandoned
