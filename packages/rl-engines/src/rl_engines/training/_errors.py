"""The errors the training engine raises; each message names the setting, what was found and the fix."""

from __future__ import annotations

from rl_engines._errors import EngineError


class TrainConfigError(EngineError, ValueError):
    """A training-engine setting is invalid or contradicts another one."""


class ModelSourceError(EngineError, ValueError):
    """The model folder is missing, holds no weights, or its vocabulary does not fit the tokenizer's."""


class MicroBatchError(EngineError, ValueError):
    """The micro-batches do not cover the batch exactly once, exceed the token budget, or differ across ranks."""


class BatchError(EngineError, ValueError):
    """The batch lacks a key the computation needs, or its tensors disagree in shape."""


class CheckpointError(EngineError):
    """A checkpoint could not be written or read."""


class CheckpointMismatchError(CheckpointError, ValueError):
    """A checkpoint was written by a different world size or a different model than the engine loading it."""
