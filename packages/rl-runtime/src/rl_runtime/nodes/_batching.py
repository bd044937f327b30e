"""Shared plumbing of the node operations: the one upstream batch, required fields, adding fields.

Mini-batches are the role's business (it splits the step's batch for its PPO epochs) and micro-batches the
engine's (it plans them under its own token budget).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rl_core.schema import ACTION_TOKENS, ATTENTION_MASK, INPUT_IDS, INSTRUCTION_IDS, INSTRUCTION_MASK, PIXEL_VALUES
from rl_runtime.workers import NodeContext, StepData, StepDataError

_TEXT_INPUTS = (INPUT_IDS, ATTENTION_MASK)
_EMBODIED_INPUTS = (INSTRUCTION_IDS, INSTRUCTION_MASK, PIXEL_VALUES, ACTION_TOKENS)


def policy_inputs(data: StepData) -> tuple[str, ...]:
    """The fields the policy's forward reads from `data`: an embodied batch (it has `pixel_values`) its instruction,
    frames and actions; a text batch its tokens."""
    return _EMBODIED_INPUTS if PIXEL_VALUES in data.batch else _TEXT_INPUTS


def single_input(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """The batch of the node's one upstream node; a StepDataError when it has none or several."""
    if len(inputs) != 1:
        raise StepDataError(
            f"node {ctx.node.id!r} ({ctx.node.operation}) takes the batch of exactly one upstream node, got "
            f"{len(inputs)} ({', '.join(inputs) or 'none'}); give it one dependency in the pipeline"
        )
    return next(iter(inputs.values()))


def require_fields(data: StepData, names: tuple[str, ...], node: str) -> None:
    """Raise StepDataError naming the fields of `names` that `data` lacks and the node that needs them."""
    missing = [name for name in names if name not in data.batch]
    if missing:
        raise StepDataError(
            f"node {node!r} needs batch fields {missing}, which no upstream node produced; found {sorted(data.batch)}"
        )


def with_fields(data: StepData, metrics: Mapping[str, float] | None = None, **tensors: torch.Tensor) -> StepData:
    """`data` with `tensors` added (or replaced) and `metrics` as the node's metrics."""
    return StepData({**data.batch, **tensors}, data.extras, metrics or {})
