"""The error a data-metric function raises for an argument it cannot use (besides `ShapeError` for tensors)."""

from __future__ import annotations

from rl_core._errors import RLCoreError


class MetricsError(RLCoreError, ValueError):
    """A metric function got a batch without a field it needs, or a bad limit; the message names it, what was
    expected and what was found."""
