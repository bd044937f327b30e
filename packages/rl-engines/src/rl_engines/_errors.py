"""The base exception of rl-engines; specific errors derive from it."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error rl-engines raises on purpose."""
