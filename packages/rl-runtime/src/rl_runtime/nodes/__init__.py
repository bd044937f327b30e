"""The built-in node operations every built-in pipeline binds, composed from rl-engines and rl-core pieces.

    generate               this rank's prompts, `batch.samples_per_prompt` samples each (rollout engine)
    compute_reward         the task's scores on each response's last token (`token_level_scores`)
    dynamic_sampling       DAPO: keep groups whose scores vary, draw more prompts until the step is full
    compute_value          critic values (`values`)
    compute_advantage      KL-in-reward (optional) and the configured advantage estimator
    compute_old_log_prob   the current policy's log-probs (`old_log_probs`)
    compute_ref_log_prob   the reference policy's log-probs (`ref_log_probs`)
    train_actor            PPO-style mini-batch updates, then the weight sync to the rollout engine
    train_critic           clipped value-loss updates
    rebalance              equal token sums per data-parallel rank (verl `balance_batch`), through the coordinator;
                           `with_rebalance` adds it after the advantages (config `batch.balance_across_ranks`)

Importing this package registers them in `rl_runtime.workers.NODE_OPERATIONS`. Each takes a
`NodeContext[NodeResources]` and reads the worker's engines, task, data shard and run config as `ctx.resources`
(`NodeResources.extras` holds what a user's own operations need besides); the task
(`Task`: prompt encoding and scoring) is the recipe's seam.
"""

from rl_runtime.nodes._advantage import compute_advantage
from rl_runtime.nodes._batching import single_input, with_fields
from rl_runtime.nodes._dynamic_sampling import dynamic_sampling, first_groups, informative_groups
from rl_runtime.nodes._generate import draw_rollouts, encode_rows, generate, response_budget, sample_prompts
from rl_runtime.nodes._log_probs import compute_old_log_prob, compute_ref_log_prob, compute_value, is_on_policy
from rl_runtime.nodes._rebalance import (
    REBALANCE_OPERATION,
    pad_samples,
    rank_seqlen_metrics,
    rebalance,
    trim_padding,
    with_rebalance,
)
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._reward import compute_reward, score_batch, sequence_scores, task_scores
from rl_runtime.nodes._rollout_batch import PAD_ID, build_rollout_batch, concat_samples, select_samples
from rl_runtime.nodes._seeds import sample_seed, sample_uid
from rl_runtime.nodes._task import PromptItem, ResponseSample, ScoreResult, Task, TaskFactory
from rl_runtime.nodes._train import sync_rollout_weights, train_actor, train_critic, update_metrics

__all__ = [
    "PAD_ID",
    "REBALANCE_OPERATION",
    "NodeResources",
    "PromptItem",
    "ResponseSample",
    "ScoreResult",
    "Task",
    "TaskFactory",
    "build_rollout_batch",
    "compute_advantage",
    "compute_old_log_prob",
    "compute_ref_log_prob",
    "compute_reward",
    "compute_value",
    "concat_samples",
    "draw_rollouts",
    "dynamic_sampling",
    "encode_rows",
    "first_groups",
    "generate",
    "informative_groups",
    "is_on_policy",
    "pad_samples",
    "rank_seqlen_metrics",
    "rebalance",
    "response_budget",
    "sample_prompts",
    "sample_seed",
    "sample_uid",
    "score_batch",
    "select_samples",
    "sequence_scores",
    "single_input",
    "sync_rollout_weights",
    "task_scores",
    "train_actor",
    "train_critic",
    "trim_padding",
    "update_metrics",
    "with_fields",
    "with_rebalance",
]
