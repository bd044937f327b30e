"""The policy loss registry: a plain dict filled by a decorator."""

from __future__ import annotations

from rl_core._registry import lookup, registrar
from rl_core.losses._types import PolicyLoss

_KIND = "policy loss"

POLICY_LOSSES: dict[str, PolicyLoss] = {}
"""Policy losses by name."""

register_policy_loss = registrar(POLICY_LOSSES, _KIND)


def get_policy_loss(name: str) -> PolicyLoss:
    """Return the policy loss registered under `name`; an unknown name raises `UnknownNameError` listing valid ones."""
    return lookup(POLICY_LOSSES, name, _KIND)
