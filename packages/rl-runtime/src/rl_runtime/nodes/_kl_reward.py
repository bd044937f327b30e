"""The KL to the reference in the reward (`algorithm.kl.mode=in_reward`, verl's `use_kl_in_reward`): each rank
penalises its samples' rewards, and the KL controller steps once per step on the whole step's KL, as verl's driver
steps its one controller on the whole batch."""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.distributed as dist

from rl_core.kl import REWARD_KL_COEF_METRIC, REWARD_KL_METRIC, apply_kl_penalty
from rl_core.schema import OLD_LOG_PROBS, REF_LOG_PROBS, RESPONSE_MASK, ROLLOUT_LOG_PROBS
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.workers import NodeContext, StepDataError


def penalise_rewards(
    ctx: NodeContext[NodeResources], batch: Mapping[str, torch.Tensor], scores: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """`scores` `(B, T)` minus `coef x KL(old log-probs, reference log-probs)` per response token, and verl's
    `actor/reward_kl_penalty` (the step's KL, `step_kl`) and `actor/reward_kl_penalty_coeff` (the coefficient used);
    then the controller steps on the step's KL and sample count. StepDataError when the batch has no reference
    log-probs yet or the worker no controller."""
    res = ctx.resources
    if REF_LOG_PROBS not in batch:
        raise StepDataError(
            f"algorithm.kl.mode=in_reward needs ref_log_probs before node {ctx.node.id!r}, but the pipeline "
            "computes them later; use kl.mode=as_loss, or a pipeline with reference_log_prob before "
            "calculate_advantages"
        )
    controller = res.kl_controller
    if controller is None:
        raise StepDataError(
            f"algorithm.kl.mode=in_reward needs a KL controller, but node {ctx.node.id!r} runs on a worker "
            "whose NodeResources.kl_controller is None; build the workers with rl_runtime.trainer's "
            "resources factory, or give NodeResources a rl_core.kl controller"
        )
    # verl's apply_kl_penalty compares the old log-probs (the actor's forward of the weights that sampled, the
    # proximal policy's under max_staleness > 0) with the reference: the built-ins' in-reward variants compute both
    # before the advantages. A pipeline file with only the reference first gets the rollout's.
    source = OLD_LOG_PROBS if OLD_LOG_PROBS in batch else ROLLOUT_LOG_PROBS
    if source not in batch:
        raise StepDataError(
            f"algorithm.kl.mode=in_reward: node {ctx.node.id!r} needs {OLD_LOG_PROBS!r} (a compute_old_log_prob node "
            f"before it) or the rollout's {ROLLOUT_LOG_PROBS!r} to compare with the reference; the batch has neither"
        )
    current = batch[source]
    mask = batch[RESPONSE_MASK]
    coef = controller.value
    penalty = apply_kl_penalty(
        scores, current, batch[REF_LOG_PROBS], mask, kl_coef=coef, estimator=res.config.algorithm.kl.estimator
    )
    kl, samples = step_kl(penalty.kl, mask, res.group)
    controller.update(kl, n_steps=samples)
    return penalty.token_level_rewards, {REWARD_KL_METRIC: kl, REWARD_KL_COEF_METRIC: coef}


def step_kl(kl: torch.Tensor, response_mask: torch.Tensor, group: dist.ProcessGroup | None) -> tuple[float, int]:
    """The step's KL over every rank of `group` and its sample count.

    The KL is `apply_kl_penalty`'s metric over the whole step: the mean, over the samples with a response token, of
    each sample's token-mean KL. Every rank of `group` (the ranks that run the advantage node) gets the same two
    numbers, so their controllers stay equal and adapt as verl's one controller does (`n_steps` the step's samples).

    Args:
        kl: `(B, T)` per-token KL, 0 off the response (`KLPenaltyOutput.kl`).
        response_mask: `(B, T)` 0/1 or bool.
        group: the data-parallel group of the ranks that run the node; None when it runs alone.
    """
    tokens = response_mask.bool().sum(dim=-1)
    per_sample = kl.double().sum(dim=-1) / tokens.clamp(min=1)
    totals = torch.stack([per_sample.sum(), (tokens > 0).sum().double(), per_sample.new_tensor(float(kl.shape[0]))])
    if group is not None and dist.get_world_size(group) > 1:
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else None
        totals = totals.to(device or torch.device("cpu"))
        dist.all_reduce(totals, op=dist.ReduceOp.SUM, group=group)
    kl_sum, with_tokens, samples = totals.tolist()
    return kl_sum / max(with_tokens, 1.0), round(samples)
