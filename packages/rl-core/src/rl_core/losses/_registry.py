"""The policy loss registry: a plain dict filled by a decorator, and the per-loss property the engines read."""

from __future__ import annotations

from collections.abc import Callable

from rl_core._registry import lookup, registrar
from rl_core.losses._types import PolicyLoss

_KIND = "policy loss"

POLICY_LOSSES: dict[str, PolicyLoss] = {}
"""Policy losses by name."""

ADVANTAGE_MULTIPLE_LOSSES: set[str] = set()
"""Names of the policy losses registered with `advantage_multiple=True`: the per-token loss is the token's advantage
times a finite factor, so it is 0, with a zero gradient, wherever the advantage is 0 (PPO's clipped surrogate, dual
clip included; decoupled PPO's is that surrogate times a detached behaviour weight)."""

_register = registrar(POLICY_LOSSES, _KIND)


def register_policy_loss(name: str, *, advantage_multiple: bool = False) -> Callable[[PolicyLoss], PolicyLoss]:
    """The decorator that registers a policy loss under `name` (a second registration of a name raises
    `DuplicateNameError`). `advantage_multiple=True` declares the loss a multiple of the advantage (see
    `ADVANTAGE_MULTIPLE_LOSSES`): a training engine may then skip the backward of zero-advantage rows."""
    register = _register(name)

    def decorate(loss: PolicyLoss) -> PolicyLoss:
        register(loss)
        if advantage_multiple:
            ADVANTAGE_MULTIPLE_LOSSES.add(name)
        return loss

    return decorate


def get_policy_loss(name: str) -> PolicyLoss:
    """Return the policy loss registered under `name`; an unknown name raises `UnknownNameError` listing valid ones."""
    return lookup(POLICY_LOSSES, name, _KIND)


def is_advantage_multiple(name: str) -> bool:
    """Whether the policy loss `name` was registered as a multiple of the advantage (`ADVANTAGE_MULTIPLE_LOSSES`)."""
    return name in ADVANTAGE_MULTIPLE_LOSSES
