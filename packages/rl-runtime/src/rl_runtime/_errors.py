"""The base exception of rl-runtime; specific errors derive from it."""

from __future__ import annotations


class RLRuntimeError(Exception):
    """Base class of every error rl-runtime raises on purpose."""
