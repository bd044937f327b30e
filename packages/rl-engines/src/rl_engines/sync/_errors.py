"""The errors trainer-side weight sync raises on purpose."""

from __future__ import annotations

from rl_engines._errors import EngineError


class SyncError(EngineError):
    """A weight sync failed or could not be verified; the message names the engine, the step and the fix."""


class SyncConfigError(SyncError, ValueError):
    """A sync or transport setting is invalid; the message names the setting."""


class SyncTimeoutError(SyncError, TimeoutError):
    """An engine call or collective of a sync did not finish within its timeout."""
