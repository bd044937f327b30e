"""The batch every advantage estimator reads, the pair it returns, and the estimator call signature."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import torch

from rl_core._validation import as_bool_mask, check_same_device, check_tensor
from rl_core.schema import BASELINE_REWARDS, GROUP_ID, RESPONSE_MASK, TOKEN_LEVEL_REWARDS, VALUES

_GROUP_ID_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


@dataclass(frozen=True, eq=False)
class AdvantageInputs:
    """One rollout batch, validated on construction.

    Attributes:
        token_level_rewards: `(B, T)` float rewards per response token (outcome rewards usually sit on the
            last response token). Rewards under a zero mask are ignored by every estimator.
        response_mask: `(B, T)` 0/1 or bool mask of the tokens the policy generated.
        group_ids: `(B,)` integer prompt id; samples of the same prompt (GRPO siblings) share it.
        values: `(B, T)` float critic values, needed by `gae` only.
        baseline_rewards: `(B,)` float reward of the greedy rollout, needed by `remax` only.
        mask: `(B, T)` bool view of `response_mask`, filled in on construction.
    """

    token_level_rewards: torch.Tensor
    response_mask: torch.Tensor
    group_ids: torch.Tensor
    values: torch.Tensor | None = None
    baseline_rewards: torch.Tensor | None = None
    mask: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        dims: dict[str, int] = {}
        check_tensor(TOKEN_LEVEL_REWARDS, self.token_level_rewards, ("B", "T"), dims=dims, floating=True)
        check_tensor(RESPONSE_MASK, self.response_mask, ("B", "T"), dims=dims)
        check_tensor("group_ids", self.group_ids, ("B",), dims=dims, dtype=_GROUP_ID_DTYPES)
        if self.values is not None:
            check_tensor(VALUES, self.values, ("B", "T"), dims=dims, floating=True)
        if self.baseline_rewards is not None:
            check_tensor(BASELINE_REWARDS, self.baseline_rewards, ("B",), dims=dims, floating=True)
        check_same_device(
            token_level_rewards=self.token_level_rewards,
            response_mask=self.response_mask,
            group_ids=self.group_ids,
            values=self.values,
            baseline_rewards=self.baseline_rewards,
        )
        # The dataclass is frozen; the derived bool mask is set once here and never changes.
        object.__setattr__(self, "mask", as_bool_mask(RESPONSE_MASK, self.response_mask))

    @classmethod
    def from_batch(cls, batch: Mapping[str, torch.Tensor]) -> AdvantageInputs:
        """The inputs from a batch keyed by the sample-schema names: `token_level_rewards`, `response_mask` `(B, T)`,
        `group_id` `(B,)`, and `values` / `baseline_rewards` where the batch has them."""
        missing = [name for name in (TOKEN_LEVEL_REWARDS, RESPONSE_MASK, GROUP_ID) if name not in batch]
        if missing:
            raise KeyError(f"advantage estimation needs batch fields {missing}; found {sorted(batch)}")
        return cls(
            token_level_rewards=batch[TOKEN_LEVEL_REWARDS],
            response_mask=batch[RESPONSE_MASK],
            group_ids=batch[GROUP_ID],
            values=batch.get(VALUES),
            baseline_rewards=batch.get(BASELINE_REWARDS),
        )

    def require(self, name: str, estimator: str) -> torch.Tensor:
        """Return the optional input `name`, or raise `ValueError` saying which estimator needs it."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(
                f"advantage estimator {estimator!r} needs {name}: build AdvantageInputs with {name}=<tensor>"
            )
        return value


class AdvantageOutput(NamedTuple):
    """Per-token advantages and returns, both `(B, T)` and zero where `response_mask` is 0."""

    advantages: torch.Tensor
    returns: torch.Tensor


class AdvantageEstimator(Protocol):
    """An advantage estimator: the batch, then its own keyword-only parameters (all with defaults).

    `*args: Any, **params: Any` is the typing spec's gradual form: any estimator taking the batch first fits.
    """

    def __call__(self, inputs: AdvantageInputs, /, *args: Any, **params: Any) -> AdvantageOutput: ...
