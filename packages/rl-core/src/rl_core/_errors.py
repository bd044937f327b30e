"""The exceptions rl-core raises; every other package derives its own from `RLCoreError`'s pattern."""

from __future__ import annotations


class RLCoreError(Exception):
    """Base class of every error rl-core raises on purpose."""


class ShapeError(RLCoreError, ValueError):
    """A tensor argument has the wrong shape, dtype or device; the message names the argument."""


class UnknownNameError(RLCoreError, KeyError):
    """A registry lookup used a name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:
        # KeyError quotes its argument; a message reads better unquoted.
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(RLCoreError, ValueError):
    """A name was registered twice in the same registry."""
