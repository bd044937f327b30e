"""Checks of the scalar hyper-parameters estimators take; each failure names the parameter."""

from __future__ import annotations


def check_unit_interval(name: str, value: float) -> float:
    """Raise `ValueError` naming `name` unless `0 <= value <= 1` (a discount or GAE lambda)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value
