"""Load-time checks of the algorithm section against the batch sizes, asked of the components themselves: the
advantage estimator with groups of `batch.samples_per_prompt`, and the adaptive KL controller with the samples one
rank's advantage node feeds it per step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl_core.advantages import check_advantage_params
from rl_core.graph import get_pipeline
from rl_core.kl import AdaptiveKLController
from rl_runtime.config._errors import ConfigProblem
from rl_runtime.config._schema_algorithm import KLMode
from rl_runtime.config._schema_rewards import policy_slots

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

FILTERING_OPERATIONS = frozenset({"embodied_sampling"})
"""Node operations that may leave a rank fewer samples than the batch plan's (the embodied success-rate band)."""
_MIN_SPLIT_SLOTS = 2
"""Split placement keeps at least one slot for the rollout."""


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


def _fewest_samples_per_rank(config: RunConfig) -> int | None:
    """The fewest samples one rank's advantage node can hold per step: the step's samples over the most ranks it may
    span (every policy slot colocated, all but one split); None when a node may filter samples out first."""
    if config.pipeline.endswith((".yaml", ".yml")):
        return None  # a pipeline file's nodes are bound when the workers start
    if FILTERING_OPERATIONS & {node.operation for node in get_pipeline(config.pipeline).nodes.values()}:
        return None
    slots = policy_slots(config)
    ranks = slots if config.placement.colocate else slots - 1
    if ranks < 1 or (not config.placement.colocate and slots < _MIN_SPLIT_SLOTS):
        return None  # the placement checks name the slots
    return max(1, config.batch.prompts_per_step * config.batch.samples_per_prompt // ranks)


def kl_horizon_problems(config: RunConfig) -> list[ConfigProblem]:
    """The adaptive KL controller refuses one step's update: `kl.horizon` must exceed 0.2 x the samples per update."""
    kl = config.algorithm.kl
    if kl.mode is not KLMode.IN_REWARD or kl.target is None:
        return []
    samples = _fewest_samples_per_rank(config)
    if samples is None:
        return []
    controller = AdaptiveKLController(kl.coef, kl.target, kl.horizon)
    try:
        controller.update(kl.target, samples)
    except ValueError as error:
        expected = (
            f"a horizon the adaptive KL controller accepts for an update of {samples} samples (one rank's share of "
            "batch.prompts_per_step x batch.samples_per_prompt)"
        )
        fix = f"the controller says: {error}; raise algorithm.kl.horizon"
        return [ConfigProblem("algorithm.kl.horizon", expected, str(kl.horizon), fix)]
    return []


def algorithm_batch_problems(config: RunConfig) -> list[ConfigProblem]:
    """Every setting of the algorithm that the component using it refuses with the run's batch sizes."""
    return [*group_size_problems(config), *kl_horizon_problems(config)]
