"""The reward-function registry and the signature every reward function has."""

from __future__ import annotations

from typing import Any, Protocol

from rl_core import lookup, registrar


class RewardFunction(Protocol):
    """`fn(response_text, ground_truth, **extra) -> float`: the score of one response."""

    def __call__(self, response_text: str, ground_truth: str, **extra: Any) -> float: ...


REWARD_FUNCTIONS: dict[str, RewardFunction] = {}
"""Registered reward functions by name."""

register_reward = registrar(REWARD_FUNCTIONS, "reward function")
"""Decorator: `@register_reward("name")` adds a reward function to `REWARD_FUNCTIONS`."""


def get_reward_function(name: str) -> RewardFunction:
    """Return the registered reward function `name`; an unknown name raises an error listing the valid ones."""
    return lookup(REWARD_FUNCTIONS, name, "reward function")
