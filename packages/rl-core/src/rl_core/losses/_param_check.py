"""Check a policy loss's keyword parameters by running the loss once on a two-token batch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rl_core.losses._registry import get_policy_loss
from rl_core.losses._types import PolicyLossInputs


def _probe_inputs() -> PolicyLossInputs:
    """One row of two tokens with every input a loss may read; current, proximal and behaviour policy agree."""
    zeros = torch.zeros(1, 2)
    return PolicyLossInputs(
        log_probs=zeros.clone(),
        old_log_probs=zeros.clone(),
        advantages=torch.tensor([[1.0, -1.0]]),
        response_mask=torch.ones(1, 2, dtype=torch.bool),
        rollout_log_probs=zeros.clone(),
    )


def check_policy_loss_params(name: str, params: Mapping[str, Any]) -> None:
    """Raise ValueError with the loss's own message when the policy loss `name` refuses `params`.

    The losses check their parameters' values when called (a clip range below 0, a dual-clip bound or a behaviour
    weight cap not above 1, ...); running the loss once on a two-token batch lets a config loader refuse such a
    value before training starts instead of at the first update. An unknown name raises `UnknownNameError`."""
    loss = get_policy_loss(name)
    try:
        loss(_probe_inputs(), **params)
    except (TypeError, ValueError) as error:
        raise ValueError(f"policy loss {name!r} refuses {dict(params)!r}: {error}") from error
