"""KL coefficient controllers: a fixed coefficient, and Ziegler et al.'s adaptive one (arXiv:1909.08593)."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

_MAX_PROPORTIONAL_ERROR = 0.2
"""Ziegler et al. clip `KL / target - 1` to ±0.2, so one update moves the coefficient by at most 20% × n/horizon."""


@runtime_checkable
class KLController(Protocol):
    """What a runtime needs from a KL controller: the coefficient, its update, and checkpointing."""

    @property
    def value(self) -> float:
        """The current KL coefficient."""
        ...

    def update(self, current_kl: float, n_steps: int) -> None:
        """Adapt the coefficient after a batch of `n_steps` samples whose mean KL was `current_kl`."""
        ...

    def state_dict(self) -> dict[str, float]:
        """Everything needed to resume exactly."""
        ...

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        """Restore a `state_dict()`."""
        ...


def _finite(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        number = math.nan
    # float() would also parse strings and turn True into 1.0; neither is a number the caller meant.
    if isinstance(value, (bool, str, bytes)) or not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return number


def _non_negative(name: str, value: float) -> float:
    number = _finite(name, value)
    if number < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return number


def _positive(name: str, value: float) -> float:
    number = _finite(name, value)
    if number <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return number


def _check_update_args(current_kl: float, n_steps: int) -> tuple[float, int]:
    kl = _finite("current_kl", current_kl)
    try:
        steps = operator.index(n_steps)
    except TypeError:
        steps = -1
    if isinstance(n_steps, bool) or steps < 0:
        raise ValueError(f"n_steps must be an int >= 0, got {n_steps!r}")
    return kl, steps


def _check_state_keys(owner: str, state: Mapping[str, float], expected: tuple[str, ...]) -> None:
    if set(state) != set(expected):
        raise ValueError(f"{owner} state must have exactly the keys {sorted(expected)}, got {sorted(state)}")


class FixedKLController:
    """A constant KL coefficient; `update` only validates its arguments.

    Args:
        kl_coef: the coefficient, >= 0.
    """

    def __init__(self, kl_coef: float) -> None:
        self._value = _non_negative("kl_coef", kl_coef)

    @property
    def value(self) -> float:
        """The KL coefficient."""
        return self._value

    def update(self, current_kl: float, n_steps: int) -> None:
        """Leave the coefficient unchanged (arguments are checked as `AdaptiveKLController.update` checks them)."""
        _check_update_args(current_kl, n_steps)

    def state_dict(self) -> dict[str, float]:
        """`{"kl_coef": value}`."""
        return {"kl_coef": self._value}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        """Restore the coefficient saved by `state_dict()`."""
        _check_state_keys("FixedKLController", state, ("kl_coef",))
        self._value = _non_negative("kl_coef", state["kl_coef"])

    def __repr__(self) -> str:
        return f"FixedKLController(kl_coef={self._value!r})"


class AdaptiveKLController:
    """Ziegler et al.'s proportional controller steering the measured KL towards `target_kl`.

    Each `update(current_kl, n_steps)` multiplies the coefficient by
    `1 + clip(current_kl / target_kl - 1, -0.2, 0.2) * n_steps / horizon`, so over about `horizon` samples the
    coefficient can change by a factor of e^±0.2.

    Args:
        init_kl_coef: starting coefficient, >= 0 (0 stays 0).
        target_kl: the KL to steer towards, > 0.
        horizon: samples over which the coefficient adapts, > 0.
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: float) -> None:
        self._value = _non_negative("init_kl_coef", init_kl_coef)
        self._target_kl = _positive("target_kl", target_kl)
        self._horizon = _positive("horizon", horizon)

    @property
    def value(self) -> float:
        """The current KL coefficient."""
        return self._value

    @property
    def target_kl(self) -> float:
        """The KL the controller steers towards."""
        return self._target_kl

    @property
    def horizon(self) -> float:
        """Samples over which the coefficient adapts."""
        return self._horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        """Move the coefficient towards the value that makes the KL hit the target.

        Args:
            current_kl: the batch's mean per-sequence KL (`apply_kl_penalty`'s "actor/reward_kl_penalty").
            n_steps: samples in the batch, >= 0 and below `horizon / 0.2` (a larger step could flip the
                coefficient's sign, which would reward divergence from the reference).
        """
        kl, steps = _check_update_args(current_kl, n_steps)
        if steps * _MAX_PROPORTIONAL_ERROR >= self._horizon:
            raise ValueError(
                f"n_steps must be < horizon / {_MAX_PROPORTIONAL_ERROR} = {self._horizon / _MAX_PROPORTIONAL_ERROR:g}, "
                f"got {n_steps}; raise horizon so one update cannot drive the coefficient to zero or below"
            )
        error = min(max(kl / self._target_kl - 1.0, -_MAX_PROPORTIONAL_ERROR), _MAX_PROPORTIONAL_ERROR)
        self._value *= 1.0 + error * steps / self._horizon

    def state_dict(self) -> dict[str, float]:
        """`{"kl_coef": value, "target_kl": ..., "horizon": ...}`."""
        return {"kl_coef": self._value, "target_kl": self._target_kl, "horizon": self._horizon}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        """Restore the coefficient and settings saved by `state_dict()`."""
        _check_state_keys("AdaptiveKLController", state, ("horizon", "kl_coef", "target_kl"))
        value = _non_negative("kl_coef", state["kl_coef"])
        target_kl = _positive("target_kl", state["target_kl"])
        horizon = _positive("horizon", state["horizon"])
        self._value, self._target_kl, self._horizon = value, target_kl, horizon

    def __repr__(self) -> str:
        return (
            f"AdaptiveKLController(kl_coef={self._value!r}, target_kl={self._target_kl!r}, horizon={self._horizon!r})"
        )
