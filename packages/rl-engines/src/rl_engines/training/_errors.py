"""The errors the training engine raises; each message names the setting, what was found and the fix."""

from __future__ import annotations

from rl_engines._errors import EngineError


class TrainConfigError(EngineError, ValueError):
    """A training-engine setting is invalid or contradicts another one.

    A config's own checks also say which field (`field`, dotted from the config class that raised, such as
    `"lr"` or `"offload.fsdp_cpu_offload"`; "" for the class as a whole), what it `expected`, the value `found`
    and a `fix`, so a caller that built the config from a file can point at the setting; other raisers leave
    `expected` empty.
    """

    def __init__(self, message: str, *, field: str = "", expected: str = "", found: object = None, fix: str = ""):
        super().__init__(message)
        self.field = field
        self.expected = expected
        self.found = found
        self.fix = fix


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
