"""The exceptions rl-coordinator raises on purpose."""

from __future__ import annotations


class CoordinatorError(Exception):
    """Base class of every error rl-coordinator raises on purpose."""


class CoordinatorInputError(CoordinatorError, ValueError):
    """A request or a sample description is invalid; the message names the field and the fix."""


class CoordinatorTimeout(CoordinatorError, TimeoutError):
    """Waiting for samples timed out; the message names the edge, the step and the counts."""
