"""The errors inference engines raise on purpose; bad input derives from `ValueError` as well."""

from __future__ import annotations

from rl_engines._errors import EngineError


class RolloutError(EngineError):
    """Base class of every error an inference engine raises on purpose."""


class InvalidRequestError(RolloutError, ValueError):
    """A generate request or an engine call argument is invalid; the engine keeps serving."""


class PromptTooLongError(InvalidRequestError):
    """A prompt does not fit in the engine's context window; the message names the request and the limit."""


class WeightUpdateError(RolloutError, ValueError):
    """A weight update was rejected before any tensor was applied; the engine keeps its previous weights."""


class UnknownParameterError(WeightUpdateError):
    """A weight update named a tensor the engine's model does not have; the message lists near names."""


class ParameterShapeError(WeightUpdateError):
    """A weight update carried a tensor whose shape differs from the engine's tensor of that name."""


class EngineStateError(RolloutError):
    """The call is not allowed in the engine's current state; the message names the state and the fix."""


class EngineAsleepError(EngineStateError):
    """The engine is asleep (weights or KV cache released); call `wake_up()` first."""


class WeightsNotLoadedError(EngineStateError):
    """The engine discarded its weights (sleep level 2) and has not been sent a full set since."""


class UnversionedWeightsError(EngineStateError):
    """Weights changed since the last `set_weight_version`, so no version can be claimed for new tokens."""


class EngineShutdownError(EngineStateError):
    """The engine was shut down; build a new one."""


class EngineTimeoutError(RolloutError, TimeoutError):
    """Waiting for admission, a drain, a pause or a collective took longer than its timeout."""
