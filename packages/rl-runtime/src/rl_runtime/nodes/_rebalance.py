"""The `rebalance` operation: re-partition a step's samples over the data-parallel ranks by token count, through
the DataCoordinator, and `with_rebalance`, which puts it in a pipeline (verl's `balance_batch`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from rl_coordinator import CoordinatorInputError
from rl_coordinator.coordinator import ReadRequest, StepSpec
from rl_core import nearest_name
from rl_core.graph import GraphError, Node, NodeRole, TaskGraph
from rl_core.schema import GROUP_ID, PROMPT_LEN, RESPONSE_LEN, UID
from rl_runtime.config import RankBalancing
from rl_runtime.nodes._batching import require_fields, single_input
from rl_runtime.nodes._rollout_batch import select_samples
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation
from rl_runtime.workers._padding import stack_padded
from rl_runtime.workers._routing import EdgeRoute, edge_key
from rl_runtime.workers._step_data import SampleBatch
from rl_runtime.workers._transport import sample_infos

REBALANCE_OPERATION = "rebalance"
"""The operation name (and the node id `with_rebalance` gives its node)."""
ADVANTAGE_OPERATION = "compute_advantage"
"""`with_rebalance` puts the node after the node of this operation unless told where."""
KEEP_GROUPS_PARAM = "keep_groups"
"""Node parameter: keep each group (samples sharing `group_id`) on one rank (bool, default false)."""
WORKLOAD_PARAM = "workload"
"""Node parameter: what to balance, a name in rl_core.balancing.WORKLOADS (default "tokens")."""
METHOD_PARAM = "method"
"""Node parameter: the partition method, a name in rl_core.balancing.PARTITION_METHODS."""
_DEFAULTS: Mapping[str, object] = {KEEP_GROUPS_PARAM: False, WORKLOAD_PARAM: "tokens", METHOD_PARAM: "karmarkar_karp"}
_NEEDS = (UID, PROMPT_LEN, RESPONSE_LEN)
_GROUP_NEEDS = (GROUP_ID,)
_SEQLEN = "global_seqlen"
"""verl's prefix of the balance metrics (see rl_runtime.metrics._perf.global_seqlen_metrics)."""


def with_rebalance(graph: TaskGraph, balancing: RankBalancing, *, after: str | None = None) -> TaskGraph:
    """`graph` with a `rebalance` node right after node `after`, or `graph` itself for RankBalancing.NONE.

    `after` defaults to the graph's one `compute_advantage` node, so advantages (and group statistics) are
    computed on the rollout's ranks and travel with their samples. The new node takes `after`'s place as a
    dependency of every node that depended on it. GraphError when `after` is missing or ambiguous.
    """
    if not isinstance(balancing, RankBalancing):
        raise GraphError(f"balancing must be a RankBalancing (e.g. RankBalancing.SAMPLES), got {balancing!r}")
    if balancing is RankBalancing.NONE:
        return graph
    if REBALANCE_OPERATION in graph:
        raise GraphError(f"graph {graph.graph_id!r} already has a node {REBALANCE_OPERATION!r}; add only one")
    anchor = _anchor(graph, after)
    params = {KEEP_GROUPS_PARAM: balancing is RankBalancing.GROUPS}
    node = Node(REBALANCE_OPERATION, REBALANCE_OPERATION, NodeRole.ACTOR, (anchor,), params=params)
    nodes = []
    for existing in graph.nodes.values():
        if anchor in existing.dependencies:
            deps = tuple(REBALANCE_OPERATION if dep == anchor else dep for dep in existing.dependencies)
            existing = dataclasses.replace(existing, dependencies=deps)
        nodes.append(existing)
        if existing.id == anchor:
            nodes.append(node)
    return TaskGraph(graph.graph_id, nodes, graph.description)


def _anchor(graph: TaskGraph, after: str | None) -> str:
    if after is not None:
        if after not in graph:
            near = nearest_name(str(after), list(graph.nodes))
            hint = f" (did you mean {near!r}?)" if near else ""
            raise GraphError(f"graph {graph.graph_id!r} has no node {after!r} to rebalance after{hint}")
        return after
    found = [node.id for node in graph.nodes.values() if node.operation == ADVANTAGE_OPERATION]
    if len(found) != 1:
        raise GraphError(
            f"graph {graph.graph_id!r} has {len(found)} {ADVANTAGE_OPERATION!r} nodes ({', '.join(found) or 'none'}); "
            "pass after=<node id> to say where the rebalance node goes"
        )
    return found[0]


def _settings(ctx: NodeContext) -> tuple[bool, str, str]:
    params = ctx.node.params
    unknown = sorted(set(params) - set(_DEFAULTS))
    if unknown:
        near = nearest_name(unknown[0], list(_DEFAULTS))
        hint = f" (did you mean {near!r}?)" if near else ""
        raise StepDataError(
            f"node {ctx.node.id!r} has unknown params {unknown}{hint}; it takes {', '.join(sorted(_DEFAULTS))}"
        )
    keep_groups = params.get(KEEP_GROUPS_PARAM, _DEFAULTS[KEEP_GROUPS_PARAM])
    if type(keep_groups) is not bool:
        raise StepDataError(
            f"node {ctx.node.id!r}: params.{KEEP_GROUPS_PARAM} must be true or false, got {keep_groups!r}"
        )
    workload = params.get(WORKLOAD_PARAM, _DEFAULTS[WORKLOAD_PARAM])
    method = params.get(METHOD_PARAM, _DEFAULTS[METHOD_PARAM])
    return keep_groups, str(workload), str(method)


def _step_spec(ctx: NodeContext, num_samples: int, keep_groups: bool, workload: str, method: str) -> StepSpec:
    try:
        return StepSpec(
            ctx.dp.size, num_samples * ctx.dp.size, group_aware=keep_groups, method=method, workload=workload
        )
    except CoordinatorInputError as exc:
        raise StepDataError(f"node {ctx.node.id!r} params: {exc}") from None


def rank_seqlen_metrics(tokens_before: int, tokens_after: int) -> dict[str, float]:
    """This rank's part of verl's `global_seqlen/{min,max,minmax_diff,balanced_min,balanced_max,mean}`.

    Every rank reports its own token sum before (`min`, `max`, `mean`) and after (`balanced_*`) balancing;
    `rl_runtime.metrics.reduce_rank_metrics` (min, max or mean by name, `minmax_diff` recomputed) turns the
    ranks' reports into verl's global figures, with no collective in the node.
    """
    before, after = float(tokens_before), float(tokens_after)
    return {
        f"{_SEQLEN}/min": before,
        f"{_SEQLEN}/max": before,
        f"{_SEQLEN}/minmax_diff": 0.0,
        f"{_SEQLEN}/balanced_min": after,
        f"{_SEQLEN}/balanced_max": after,
        f"{_SEQLEN}/mean": before,
    }


@register_operation(REBALANCE_OPERATION)
def rebalance(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """This rank's share of the step's samples after balancing the token workload over the data-parallel ranks.

    Every rank puts its samples on the node's own coordinator edge (`"<id>-><id>"`, by reference: the batch to
    the object store, infos to the coordinator) and reads back its share of a partition computed once for all
    ranks (rl_core.balancing, Karmarkar-Karp by default). Every rank must hold as many samples. The
    samples keep every field, advantages included; each rank's share comes back in uid order, padded to a
    common width and trimmed to the longest sample. With one rank the batch passes through unchanged. Node
    params: `keep_groups`, `workload`, `method` (see the module constants).
    """
    data = single_input(ctx, inputs)
    keep_groups, workload, method = _settings(ctx)
    require_fields(data, _NEEDS + (_GROUP_NEEDS if keep_groups else ()), ctx.node.id)
    if data.num_samples == 0:
        raise StepDataError(
            f"node {ctx.node.id!r} got no samples on data-parallel rank {ctx.dp.rank}; every one of the "
            f"{ctx.dp.size} ranks must hold the same number of samples, at least one"
        )
    route = EdgeRoute(edge_key(ctx.node.id, ctx.node.id), ctx.node.id, ctx.node.id, False, ctx.dp.size, ctx.dp.size)
    infos = sample_infos(data, route)
    before = sum(info.total_tokens for info in infos)
    if ctx.dp.size == 1:
        return StepData(data.batch, data.extras, rank_seqlen_metrics(before, before))
    if ctx.coordinator is None:
        raise StepDataError(
            f"node {ctx.node.id!r} moves samples between {ctx.dp.size} data-parallel ranks through the "
            "DataCoordinator, but this worker has none; start the workers with coordinator=start_coordinator()"
        )
    spec = _step_spec(ctx, data.num_samples, keep_groups, workload, method)
    ctx.coordinator.put_batch(route.key, infos, SampleBatch(data, f"node {ctx.node.id!r}"))
    try:
        mine, samples = ctx.coordinator.get_batch(ReadRequest(route.key, ctx.step, ctx.dp.rank, spec))
    except CoordinatorInputError as exc:
        raise StepDataError(
            f"node {ctx.node.id!r}, step {ctx.step}: the coordinator could not partition the step ({exc}); every "
            f"rank must hold {data.num_samples} samples" + (", in whole groups of one size" if keep_groups else "")
        ) from exc
    balanced = stack_padded(samples)
    ordered = select_samples(balanced, torch.argsort(balanced.batch[UID]))
    after = sum(info.total_tokens for info in mine)
    return StepData(ordered.batch, ordered.extras, rank_seqlen_metrics(before, after))
