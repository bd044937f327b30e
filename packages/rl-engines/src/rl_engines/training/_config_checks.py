"""The checks the engine's config classes share: each raises a `TrainConfigError` naming the field, what was
expected and what was found."""

from __future__ import annotations

import math

from rl_engines.training._errors import TrainConfigError


def invalid(owner: str, name: str, expected: str, found: object, fix: str = "", message: str = "") -> TrainConfigError:
    """The error of `owner.name` holding `found` instead of `expected` (the message defaults to saying so)."""
    text = message or f"{owner}.{name} must be {expected}, got {found!r}"
    return TrainConfigError(
        f"{text}; {fix}" if fix and not message else text, field=name, expected=expected, found=found, fix=fix
    )


def check_positive(owner: str, name: str, value: float) -> None:
    """Raise unless `owner.name` is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise invalid(owner, name, "a finite number > 0", value)


def check_non_negative(owner: str, name: str, value: float) -> None:
    """Raise unless `owner.name` is a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or not math.isfinite(value):
        raise invalid(owner, name, "a finite number >= 0", value)


def check_bool(owner: str, name: str, value: object) -> None:
    """Raise unless `owner.name` is True or False."""
    if not isinstance(value, bool):
        raise invalid(owner, name, "True or False", value)
