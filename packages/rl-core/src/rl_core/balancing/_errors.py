"""The exception the balancing functions raise on invalid input."""

from __future__ import annotations

from rl_core._errors import RLCoreError


class BalancingError(RLCoreError, ValueError):
    """A balancing input (token counts, workloads, part or micro-batch counts, budget) is invalid; the message
    names the argument, what was expected, what was found and the fix."""
