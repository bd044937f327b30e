"""The reward plug-in point: resolve a registered name, `pkg.mod:fn` or `path/to/file.py:fn` to a function."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from rl_core import UnknownNameError, import_from_spec
from rl_recipes._errors import RecipeError
from rl_recipes.rewards._builtin import AVAILABILITY_CHECKS
from rl_recipes.rewards._registry import RewardFunction, get_reward_function

EXPECTED_SIGNATURE = "fn(response_text: str, ground_truth: str) -> float"
"""The documented form; `fn(response_text, ground_truth, **extra)` is taken too, and then gets the sample's extras."""
_SPEC_FORMS = "a registered name, a dotted path 'pkg.mod:fn', or a file path 'path/to/file.py:fn'"


class RewardLoadError(RecipeError, ValueError):
    """A reward-function spec does not resolve to a usable function; the message names the spec and the fix."""


def load_reward_function(spec: str) -> RewardFunction:
    """Return the reward function named by `spec`: a registered name, `pkg.mod:fn` or `path/to/file.py:fn`.

    The function takes `(response_text, ground_truth)` (`EXPECTED_SIGNATURE`), or that and `**extra` to receive
    the sample's extras as keywords; one without `**extra` is wrapped so the extras are dropped.
    Every problem (unknown name, module or file not found, import failure, missing attribute, not
    callable, wrong signature, missing optional package) raises `RewardLoadError` before training starts.
    """
    if ":" not in spec:
        return _load_registered(spec)
    fn = import_from_spec(spec, what="reward function", forms=_SPEC_FORMS, error=RewardLoadError, placeholder="fn")
    return fn if _check_signature(spec, fn) else _DropExtras(fn)


class _DropExtras:
    """A `fn(response_text, ground_truth) -> float` seen as a `RewardFunction`: the per-sample extras are dropped."""

    def __init__(self, fn: Callable[[str, str], float]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, response_text: str, ground_truth: str, **extra: Any) -> float:
        return self.fn(response_text, ground_truth)


def _load_registered(spec: str) -> RewardFunction:
    try:
        fn = get_reward_function(spec)
    except UnknownNameError as exc:
        raise RewardLoadError(f"reward function spec {spec!r}: {exc}; or give {_SPEC_FORMS}") from None
    check = AVAILABILITY_CHECKS.get(spec)
    if check is not None:
        try:
            check()
        except ImportError as exc:
            raise RewardLoadError(f"reward function spec {spec!r}: {exc}") from exc
    return fn


def _check_signature(spec: str, fn: object) -> bool:
    """Refuse `fn` unless it takes `(response_text, ground_truth)`; True when it also takes `**extra`."""
    if not callable(fn):
        raise RewardLoadError(
            f"reward function spec {spec!r} names a {type(fn).__name__}, which is not callable; "
            f"point it at a function {EXPECTED_SIGNATURE}"
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True  # Some builtins hide their signature; they are checked per sample instead.
    try:
        signature.bind("", "")
    except TypeError:
        raise RewardLoadError(
            f"reward function spec {spec!r} has signature {signature}; expected {EXPECTED_SIGNATURE} "
            "(two positional arguments: the response text and the ground truth; add **extra to also receive "
            "the sample's extras as keywords)"
        ) from None
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
