"""The base exception of rl-coordinator; specific errors derive from it."""

from __future__ import annotations


class CoordinatorError(Exception):
    """Base class of every error rl-coordinator raises on purpose."""
