"""The built-in node operations every built-in pipeline binds, composed from rl-engines and rl-core pieces.

    generate               this rank's prompts, `batch.samples_per_prompt` samples each (rollout engine)
    compute_reward         the task's scores on each response's last token (`token_level_scores`)
    compute_greedy_baseline  ReMax: a greedy response per prompt, its score as the samples' `baseline_rewards`
    dynamic_sampling       DAPO: keep groups whose scores vary, draw more prompts until the step is full
    compute_value          critic values (`values`)
    compute_advantage      KL-in-reward (optional) and the configured advantage estimator
    compute_old_log_prob   the current policy's log-probs (`old_log_probs`)
    compute_ref_log_prob   the reference policy's log-probs (`ref_log_probs`)
    train_actor            PPO-style mini-batch updates, then the weight sync to the rollout engine
    train_critic           clipped value-loss updates
    embodied_rollout       embodied: the VLA acts in the env (`NodeResources.env`), n episodes per (task, trial)
    embodied_sampling      embodied: keep the groups whose success rate lies in the accuracy band
    embodied_reward        embodied: SRPO progress reward (or binary success) on the last valid action token
    rebalance              equal token sums per data-parallel rank (verl `balance_batch`), through the coordinator;
                           `with_rebalance` adds it after the advantages (config `batch.balance_across_ranks`)

Importing this package registers them in `rl_runtime.workers.NODE_OPERATIONS`. Each takes a
`NodeContext[NodeResources]` and reads the worker's engines, task, data shard and run config as `ctx.resources`
(`NodeResources.extras` holds what a user's own operations need besides); the task
(`Task`: prompt encoding and scoring) is the recipe's seam. Prompts are encoded once per rollout worker when it is
built (`PromptTable`, `NodeResources.prompt_table`), not in the step.
"""

# The built-in operations register themselves in NODE_OPERATIONS when their modules are imported.
from rl_runtime.nodes import (  # noqa: F401
    _advantage,
    _continuous,
    _dynamic_sampling,
    _embodied,
    _generate,
    _greedy_baseline,
    _log_probs,
    _rebalance,
    _reward,
    _staleness_buffer,
    _train,
)
from rl_runtime.nodes._batching import single_input, with_fields
from rl_runtime.nodes._episodes import ActionPolicy, Episode, InstructionEncoder, run_episodes
from rl_runtime.nodes._prompt_table import PromptTable
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._task import PromptItem, ResponseSample, ScoreResult, Task, TaskFactory

__all__ = [
    "ActionPolicy",
    "Episode",
    "InstructionEncoder",
    "NodeResources",
    "PromptItem",
    "PromptTable",
    "ResponseSample",
    "ScoreResult",
    "Task",
    "TaskFactory",
    "run_episodes",
    "single_input",
    "with_fields",
]
