"""The workload of bench/dispatch.py: a GRPO step's batch, built by a rollout rank and consumed by a trainer rank.

Both dispatch paths run these same functions in the same worker processes; only how the batch travels differs.

Payload, chosen to match what a GRPO step moves from rollout to the actor update in verl (the DataProto keys
`update_actor` reads), at the small end of real runs: sequences of 1024 tokens (512 prompt + 512 response), and per
sample `input_ids`, `attention_mask`, `position_ids` (1024 x int64 each), `responses`, `response_mask`
(512 x int64), `old_log_probs`, `ref_log_prob`, `advantages` (512 x float32), plus the ids and lengths the
coordinator indexes (4 x int64): 38,944 bytes a sample. verl keeps masks and ids as int64, so they are here too.
The reward node sends `token_level_scores` (one float32 a sample) on an edge of its own. Each trainer rank reports
the metrics a verl GRPO actor rank reports (`actor/*`, `response_length/*`, `critic/*`, ...), about 40 numbers.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import ray.cloudpickle
import torch

from rl_core.graph import Node, TaskGraph
from rl_runtime.workers import NODE_TIMING_PREFIX as TIMING_PREFIX
from rl_runtime.workers import NodeContext, StepData, register_operation

# Ray worker processes cannot import bench/ modules by name; ship this module's functions by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

PROMPT_TOKENS = 512
RESPONSE_TOKENS = 512
VOCAB = 32_000
UID_STEP_STRIDE = 1_000_000
UID_RANK_STRIDE = 10_000
ROLLOUT, REWARD, TRAIN = "rollout", "reward", "train"
SCORE_KEY = "token_level_scores"
CHECKSUMS = ("bench/uid_sum", "bench/input_id_sum", "bench/response_tokens", "bench/score_sum")
"""Order-free integer sums over a rank's samples: their totals over ranks must agree between the two paths."""


def rollout_batch(step: int, dp_rank: int, samples: int) -> dict[str, torch.Tensor]:
    """The batch one rollout rank produces at `step`: `samples` sequences of PROMPT_TOKENS + RESPONSE_TOKENS."""
    uid = step * UID_STEP_STRIDE + dp_rank * UID_RANK_STRIDE + torch.arange(samples, dtype=torch.int64)
    tokens = PROMPT_TOKENS + RESPONSE_TOKENS
    input_ids = (uid[:, None] + torch.arange(tokens, dtype=torch.int64)) % VOCAB
    response_len = RESPONSE_TOKENS - uid % (RESPONSE_TOKENS // 2)
    response_mask = (torch.arange(RESPONSE_TOKENS)[None, :] < response_len[:, None]).to(torch.int64)
    attention_mask = torch.cat([torch.ones(samples, PROMPT_TOKENS, dtype=torch.int64), response_mask], dim=1)
    log_probs = -(input_ids[:, PROMPT_TOKENS:] % 13).to(torch.float32) / 13.0
    return {
        "uid": uid,
        "group_id": uid // 8,
        "prompt_len": torch.full((samples,), PROMPT_TOKENS, dtype=torch.int64),
        "response_len": response_len,
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": torch.arange(tokens, dtype=torch.int64).expand(samples, tokens).contiguous(),
        "responses": input_ids[:, PROMPT_TOKENS:].clone(),
        "response_mask": response_mask,
        "old_log_probs": log_probs,
        "ref_log_prob": log_probs * 1.01,
        "advantages": ((uid % 3) - 1).to(torch.float32)[:, None].expand(samples, RESPONSE_TOKENS).contiguous(),
    }


def reward_batch(rollout: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The reward node's output for `rollout`: one score a sample (a rule reward: uid parity)."""
    uid = rollout["uid"]
    return {"uid": uid, "group_id": rollout["group_id"], SCORE_KEY: (uid % 2).to(torch.float32)}


def _stats(prefix: str, values: torch.Tensor) -> dict[str, float]:
    values = values.to(torch.float64)
    return {
        f"{prefix}/mean": float(values.mean()),
        f"{prefix}/max": float(values.max()),
        f"{prefix}/min": float(values.min()),
    }


def train_metrics(batch: Mapping[str, torch.Tensor], scores: torch.Tensor) -> dict[str, float]:
    """What a trainer rank reports for its share: a GRPO loss over the batch and verl's actor metrics."""
    mask = batch["response_mask"].to(torch.float32)
    tokens = mask.sum()
    ratio = torch.exp(batch["old_log_probs"] - batch["ref_log_prob"])
    kl = (batch["old_log_probs"] - batch["ref_log_prob"]) * mask
    loss = -(batch["advantages"] * ratio * mask).sum() / tokens
    response_len = batch["response_len"].to(torch.float64)
    return {
        "actor/pg_loss": float(loss),
        "actor/pg_clipfrac": float(((ratio - 1).abs() > 0.2).to(torch.float32).mul(mask).sum() / tokens),
        "actor/pg_clipfrac_lower": 0.0,
        "actor/ppo_kl": float(kl.sum() / tokens),
        "actor/entropy": float(-(batch["old_log_probs"] * mask).sum() / tokens),
        "actor/grad_norm": float(loss.abs()),
        "actor/lr": 1e-6,
        **_stats("response_length", response_len),
        "response_length/clip_ratio": float((response_len == RESPONSE_TOKENS).to(torch.float64).mean()),
        **_stats("prompt_length", batch["prompt_len"]),
        "prompt_length/clip_ratio": 0.0,
        **_stats("critic/score", scores),
        **_stats("critic/rewards", scores),
        **_stats("critic/advantages", batch["advantages"][:, 0]),
        **_stats("critic/returns", batch["advantages"][:, 0]),
        **_stats("global_seqlen", batch["attention_mask"].sum(dim=1)),
        "perf/total_num_tokens": float(batch["attention_mask"].sum()),
        "perf/max_memory_allocated_gb": 0.0,
        "bench/uid_sum": float(batch["uid"].sum()),
        "bench/input_id_sum": float(batch["input_ids"].sum()),
        "bench/response_tokens": float(tokens),
        "bench/score_sum": float(scores.sum()),
    }


@register_operation("bench_rollout")
def bench_rollout(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """A rollout rank's batch for this step (`samples` node param)."""
    batch = rollout_batch(ctx.step, ctx.dp.rank, int(ctx.node.params["samples"]))
    return StepData(batch, metrics={"gen/num_samples": float(batch["uid"].numel())})


@register_operation("bench_reward")
def bench_reward(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """Scores the rollout (same worker, local edge)."""
    return StepData(reward_batch(inputs[ROLLOUT].batch))


@register_operation("bench_train")
def bench_train(ctx: NodeContext, inputs: Mapping[str, StepData]) -> StepData:
    """A trainer rank's update on its share of the rollout and reward edges (both from the coordinator)."""
    # Each coordinator edge is split over the trainer ranks on its own, so the two shares need not hold the same
    # samples; the scores only feed their own statistics here.
    return StepData(metrics=train_metrics(inputs[ROLLOUT].batch, inputs[REWARD].batch[SCORE_KEY]))


def grpo_graph(samples_per_rank: int) -> TaskGraph:
    """rollout -> reward, and train after both: the planner splits it into {rollout, reward} and {train}."""

    def node(node_id: str, deps: tuple[str, ...] = (), **params: object) -> Node:
        return Node(node_id, f"bench_{node_id}", dependencies=deps, params=params)

    return TaskGraph(
        "grpo", [node(ROLLOUT, samples=samples_per_rank), node(REWARD, (ROLLOUT,)), node(TRAIN, (ROLLOUT, REWARD))]
    )


def baseline_produce(actor: Any, step: int, dp_rank: int, samples: int) -> dict[str, np.ndarray]:
    """The baseline's rollout rank (run on a DAG worker through `__ray_call__`): the batch, returned by value.

    As numpy arrays, which Ray serialises zero-copy (out-of-band buffers); torch tensors would go through
    torch's pickling, about twice as slow on the controller, which would flatter the by-reference path.
    """
    batch = rollout_batch(step, dp_rank, samples)
    batch[SCORE_KEY] = reward_batch(batch)[SCORE_KEY]
    return {name: tensor.numpy() for name, tensor in batch.items()}


def baseline_consume(actor: Any, shard: dict[str, np.ndarray]) -> dict[str, float]:
    """The baseline's trainer rank: its shard arrives as an argument; returns the same metrics as `bench_train`."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        # Arrays from the object store are read-only; train_metrics only reads them, so no copy is needed.
        warnings.simplefilter("ignore", UserWarning)
        batch = {name: torch.from_numpy(array) for name, array in shard.items()}
    metrics = train_metrics(batch, batch[SCORE_KEY])
    return metrics | {f"{TIMING_PREFIX}{TRAIN}": time.perf_counter() - start}


def reshard(outputs: Sequence[Mapping[str, np.ndarray]], consumers: int) -> list[dict[str, np.ndarray]]:
    """The gathered outputs, in order, split into `consumers` equal contiguous shards (verl's concat, then chunk).

    Each shard is built from its own pieces, never from one concatenated batch, and a shard that is exactly one
    output is passed on as it is: the fewest copies a by-value redistribution can make.
    """
    total = sum(len(output["uid"]) for output in outputs)
    if total % consumers:
        raise ValueError(f"{total} samples cannot be split over {consumers} consumers; pick a multiple")
    size = total // consumers
    shards, index, offset = [], 0, 0
    for _ in range(consumers):
        pieces, need = [], size
        while need:
            output = outputs[index]
            take = min(need, len(output["uid"]) - offset)
            pieces.append((output, offset, offset + take))
            need, offset = need - take, offset + take
            if offset == len(output["uid"]):
                index, offset = index + 1, 0
        if len(pieces) == 1 and pieces[0][1] == 0 and pieces[0][2] == len(pieces[0][0]["uid"]):
            shards.append(dict(pieces[0][0]))
        else:
            shards.append({key: np.concatenate([out[key][a:b] for out, a, b in pieces]) for key in outputs[0]})
    return shards
