"""Load-time checks of the algorithm section against the batch sizes and the pipeline, asked of the components
themselves where they can be: the advantage estimator with groups of `batch.samples_per_prompt`, the in-reward KL
penalty against where the pipeline computes the reference log-probs, and the adaptive KL controller with the samples
of one step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from rl_core.advantages import check_advantage_params
from rl_core.graph import KL_IN_REWARD_PIPELINES, TaskGraph, get_pipeline
from rl_core.kl import AdaptiveKLController
from rl_runtime.config._errors import ConfigProblem
from rl_runtime.config._schema_algorithm import KLMode

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

ADVANTAGE_OPERATION = "compute_advantage"
"""The node operation that applies the in-reward KL penalty before the advantages."""
REFERENCE_OPERATION = "compute_ref_log_prob"
"""The node operation that adds the reference log-probs the penalty reads."""


def group_size_problems(config: RunConfig) -> list[ConfigProblem]:
    """The advantage estimator refuses groups of `batch.samples_per_prompt` (pass@k needs two samples per group)."""
    algorithm, size = config.algorithm, config.batch.samples_per_prompt
    try:
        check_advantage_params(algorithm.adv_estimator, algorithm.adv_params, group_size=size)
    except ValueError as error:
        expected = f"a group size advantage estimator {algorithm.adv_estimator!r} accepts"
        fix = f"{error.__cause__ or error}; raise batch.samples_per_prompt or pick another algorithm.adv_estimator"
        return [ConfigProblem("batch.samples_per_prompt", expected, str(size), fix)]
    return []


def kl_in_reward(config: RunConfig) -> bool:
    """Whether the run puts the KL to the reference in the reward (`algorithm.kl.mode=in_reward`)."""
    return config.algorithm.kl.mode is KLMode.IN_REWARD


def run_graph(config: RunConfig) -> TaskGraph | None:
    """The pipeline `config` runs: a built-in (its `rl_core.graph.KL_IN_REWARD_PIPELINES` variant under
    `kl.mode=in_reward`), or its pipeline file when it reads here (None when it does not: the runtime names what is
    wrong with the file when it loads the pipeline)."""
    from rl_runtime.config._schema import is_pipeline_file  # the schema imports this module

    if not is_pipeline_file(config.pipeline):
        return get_pipeline(config.pipeline, kl_in_reward=kl_in_reward(config))
    try:
        return TaskGraph.from_dict(yaml.safe_load(Path(config.pipeline).read_text()))
    except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError):  # GraphError is a ValueError
        return None


def kl_in_reward_problems(config: RunConfig) -> list[ConfigProblem]:
    """`kl.mode=in_reward` with a pipeline whose advantage node runs before its reference log-probs: the node refuses
    the batch (StepDataError) at the first step. Every built-in runs its in-reward variant, which computes them first;
    what is left is a pipeline file, or a registered pipeline without such a variant, that computes them after."""
    if not kl_in_reward(config):
        return []
    graph = run_graph(config)
    if graph is None:
        return []
    nodes = graph.nodes
    early = [
        node_id
        for node_id, node in nodes.items()
        if node.operation == ADVANTAGE_OPERATION
        and not any(nodes[ancestor].operation == REFERENCE_OPERATION for ancestor in graph.ancestors(node_id))
    ]
    if not early:
        return []
    expected = (
        f"'none' or 'as_loss' with pipeline {config.pipeline!r}: the in-reward penalty needs the reference log-probs "
        f"before the advantages, but its {', '.join(map(repr, early))} node runs before any {REFERENCE_OPERATION} node"
    )
    variants = ", ".join(sorted(KL_IN_REWARD_PIPELINES))
    fix = (
        "set algorithm.kl.mode=as_loss (the KL as a loss term, GRPO's choice), or use a pipeline with an in-reward "
        f"variant ({variants}), a pipeline file whose {REFERENCE_OPERATION} node runs before {ADVANTAGE_OPERATION}, "
        "or register the pipeline's in-reward variant with rl_core.graph.register_kl_in_reward_pipeline"
    )
    return [ConfigProblem("algorithm.kl.mode", expected, "'in_reward'", fix)]


def step_samples(config: RunConfig) -> int:
    """The samples one step's KL controller update counts: the whole step's, `batch.prompts_per_step` x
    `batch.samples_per_prompt`, on every placement (the advantage nodes step their controllers on the step's KL
    together, `rl_runtime.nodes._kl_reward.step_kl`). A filter (DAPO's refills, the embodied band) never adds any."""
    return config.batch.prompts_per_step * config.batch.samples_per_prompt


def kl_horizon_problems(config: RunConfig) -> list[ConfigProblem]:
    """The adaptive KL controller refuses one step's update: `kl.horizon` must exceed 0.2 x the samples per update."""
    kl = config.algorithm.kl
    if kl.mode is not KLMode.IN_REWARD or kl.target is None:
        return []
    samples = step_samples(config)
    controller = AdaptiveKLController(kl.coef, kl.target, kl.horizon)
    try:
        controller.update(kl.target, samples)
    except ValueError as error:
        expected = (
            f"a horizon the adaptive KL controller accepts for an update of {samples} samples (a step's "
            "batch.prompts_per_step x batch.samples_per_prompt)"
        )
        fix = f"the controller says: {error}; raise algorithm.kl.horizon"
        return [ConfigProblem("algorithm.kl.horizon", expected, str(kl.horizon), fix)]
    return []


def algorithm_batch_problems(config: RunConfig) -> list[ConfigProblem]:
    """Every setting of the algorithm that the component using it refuses with the run's batch sizes."""
    in_reward = kl_in_reward_problems(config)
    return [*group_size_problems(config), *in_reward, *([] if in_reward else kl_horizon_problems(config))]
