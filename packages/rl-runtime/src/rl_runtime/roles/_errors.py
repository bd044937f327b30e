"""The errors the roles raise: a role config or engine that does not fit the role, and a batch it cannot use."""

from __future__ import annotations

from rl_runtime._errors import RLRuntimeError


class RoleError(RLRuntimeError, ValueError):
    """A role was asked to compute on a batch it cannot use (a missing key, an unsplittable mini-batch count)."""


class RoleConfigError(RoleError):
    """A role's config field is invalid, or its engine does not fit the role; the message names the field and fix."""
