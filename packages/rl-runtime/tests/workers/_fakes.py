"""Test-double node operations (registered under `fake_*` names) and the graphs the worker tests run."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping

import attrs
import ray.cloudpickle
import torch

from rl_core.graph import Node, TaskGraph
from rl_runtime.workers import NodeContext, StepData, register_operation

# Worker processes cannot import this test module; ship its functions by value instead of by name.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

UID_STEP_STRIDE = 10_000
UID_RANK_STRIDE = 1_000


def fake_uids(step: int, dp_rank: int, n: int) -> list[int]:
    """The uids fake_generate gives rank `dp_rank` at `step`."""
    return [step * UID_STEP_STRIDE + dp_rank * UID_RANK_STRIDE + i for i in range(n)]


@register_operation("fake_generate")
def fake_generate(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """`num_samples` samples of `width` float32 values; sample uid u holds the value u everywhere."""
    n, width = int(ctx.node.params["num_samples"]), int(ctx.node.params["width"])
    uids = torch.tensor(fake_uids(ctx.step, ctx.dp.rank, n), dtype=torch.int64)
    batch = {
        "uid": uids,
        "group_id": uids // 2,
        "prompt_len": torch.full((n,), 3, dtype=torch.int64),
        "response_len": torch.full((n,), 5, dtype=torch.int64),
        "values": uids.to(torch.float32)[:, None].expand(n, width).contiguous(),
    }
    extras = {"prompt_text": [f"prompt {u}" for u in uids.tolist()]}
    return StepData(batch, extras, {"fake/generated": float(n)})


@register_operation("fake_scale")
def fake_scale(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """Doubles `values` of its single input; keeps the uids and extras."""
    (data,) = inputs.values()
    batch = dict(data.batch)
    batch["values"] = batch["values"] * 2
    return StepData(batch, data.extras, {"fake/scaled": float(data.num_samples)})


@register_operation("fake_check_uids")
def fake_check_uids(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """Per input: its uid count and sum, and whether every sample's values and text still match its uid."""
    metrics = {}
    for src, data in sorted(inputs.items()):
        uids = data.batch["uid"]
        factor = 2.0 if src.startswith("scale") else 1.0
        expected = uids.to(torch.float32)[:, None] * factor
        intact = bool((data.batch["values"] == expected).all()) and data.extras["prompt_text"] == [
            f"prompt {u}" for u in uids.tolist()
        ]
        metrics |= {
            f"fake/{src}/uid_count": float(uids.numel()),
            f"fake/{src}/uid_sum": float(uids.sum()),
            f"fake/{src}/intact": float(intact),
        }
    return StepData(metrics=metrics)


@register_operation("fake_async_count")
async def fake_async_count(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    await asyncio.sleep(0)
    return StepData(metrics={"fake/async_seen": float(sum(d.num_samples for d in inputs.values()))})


@register_operation("fake_fail")
def fake_fail(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    if ctx.step == ctx.node.params["fail_at"]:
        raise ValueError(f"fake failure at step {ctx.step}")
    return StepData(metrics={"fake/ok": 1.0})


@register_operation("fake_sleep")
def fake_sleep(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    time.sleep(float(ctx.node.params["seconds"]))
    return StepData()


@register_operation("fake_not_step_data")
def fake_not_step_data(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    return {"values": torch.zeros(2)}  # type: ignore[return-value]


@register_operation("fake_float_ids")
def fake_float_ids(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    return StepData({"input_ids": torch.zeros(2, 3)})  # token ids must be integers


@attrs.frozen
class FakeResources:
    """A test double of a worker's typed resources (what operations see as `ctx.resources`)."""

    scale: float


@register_operation("fake_read_resource")
def fake_read_resource(ctx: NodeContext[FakeResources], inputs: Mapping[str, StepData]) -> StepData:
    return StepData(metrics={"fake/resource": float(ctx.resources.scale), "fake/rank": float(ctx.rank)})


def node(node_id: str, operation: str, deps: tuple[str, ...] = (), **params: object) -> Node:
    return Node(node_id, operation, dependencies=deps, params=params)


def chain_graph(num_samples: int, width: int) -> TaskGraph:
    """generate -> scale -> check: one chain, so one sub-graph and every edge local."""
    return TaskGraph(
        "chain",
        [
            node("generate", "fake_generate", num_samples=num_samples, width=width),
            node("scale", "fake_scale", ("generate",)),
            node("check", "fake_check_uids", ("scale",)),
        ],
    )


def merge_graph(num_samples: int, width: int) -> TaskGraph:
    """generate -> scale, and check after both: splits into {generate, scale} and {check}."""
    return TaskGraph(
        "merge",
        [
            node("generate", "fake_generate", num_samples=num_samples, width=width),
            node("scale", "fake_scale", ("generate",)),
            node("check", "fake_check_uids", ("generate", "scale")),
        ],
    )
