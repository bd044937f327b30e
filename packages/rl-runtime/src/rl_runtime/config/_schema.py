"""The top-level run configuration and the checks that span its sections."""

from __future__ import annotations

from typing import Any

import attrs

from rl_core.envs import (
    ENVIRONMENTS,
    VIDEO_EMBEDDERS,
    EmbedderConfig,
    EnvConfig,
    EnvConfigError,
    check_env_config,
)
from rl_core.graph import EMBODIED_OPERATIONS, PIPELINES, NodeRole, get_pipeline
from rl_engines.judge import JudgeConfig
from rl_engines.reward_model import RewardModelConfig
from rl_engines.training import TrainEngineConfig
from rl_runtime.config._batch_plan import BatchPlan
from rl_runtime.config._errors import ConfigError, ConfigProblem, describe_value
from rl_runtime.config._schema_algorithm import AlgorithmConfig, RewardKind
from rl_runtime.config._schema_algorithm_batch import algorithm_batch_problems
from rl_runtime.config._schema_async import async_problems
from rl_runtime.config._schema_engines import engine_problems
from rl_runtime.config._schema_rewards import policy_slots, reward_model_slots, reward_problems
from rl_runtime.config._schema_rollout import rollout_problems
from rl_runtime.config._schema_sections import (
    TORCHRUN_LAUNCHER,
    BatchConfig,
    DataConfig,
    PlacementConfig,
    RankBalancing,
    RolloutConfig,
    TrainerConfig,
)
from rl_runtime.config._validators import of_type, optional, registered_name

PIPELINE_FILE_SUFFIXES = (".yaml", ".yml")
"""A `pipeline` value ending in one of these is a path to a pipeline file, not a built-in name."""

DYNAMIC_SAMPLING_OPERATION = "dynamic_sampling"
"""The node operation that needs `algorithm.dynamic_sampling`."""
BASELINE_OPERATIONS = {"remax": "compute_greedy_baseline"}
"""Advantage estimators that need a baseline reward, and the node operation that computes it."""
EMBODIED_SAMPLING_OPERATION = "embodied_sampling"
"""The node operation that needs `algorithm.embodied_sampling`."""
DEFAULT_ROLLOUT_ENGINE = "hf"
"""`rollout.engine`'s default; an embodied run leaves it there (its VLA policy is built from the actor's config)."""
_MIN_SPLIT_SLOTS = 2
"""Split placement gives the rollout and the training their own slots, so it needs two at least."""


def is_pipeline_file(pipeline: str) -> bool:
    """True when a `pipeline` setting names a pipeline file rather than a built-in pipeline."""
    return pipeline.endswith(PIPELINE_FILE_SUFFIXES)


_check_pipeline_name = registered_name(PIPELINES, "pipeline")


def _check_pipeline(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, str) and is_pipeline_file(value):
        return
    try:
        _check_pipeline_name(None, attribute, value)
    except ConfigError as exc:
        problem = exc.problems[0]
        expected = f"{problem.expected} or a pipeline file ({', '.join(PIPELINE_FILE_SUFFIXES)})"
        raise ConfigError([attrs.evolve(problem, expected=expected)]) from None


def _pipeline_roles(pipeline: str) -> frozenset[NodeRole] | None:
    if is_pipeline_file(pipeline):
        return None  # read by the runtime; its roles are checked when it is loaded
    return frozenset(node.role for node in get_pipeline(pipeline).nodes.values())


def _critic_problems(config: RunConfig) -> list[ConfigProblem]:
    roles = _pipeline_roles(config.pipeline)
    if roles is None:
        return []
    if NodeRole.CRITIC in roles and config.critic is None:
        expected = f"a critic section: pipeline {config.pipeline!r} trains a value model"
        return [ConfigProblem("critic", expected, "null", "add critic.model (and its optimizer)")]
    if NodeRole.CRITIC not in roles and config.critic is not None:
        expected = f"null: pipeline {config.pipeline!r} has no critic"
        return [
            ConfigProblem("critic", expected, "a critic section", "remove it, or use a pipeline with a critic (ppo)")
        ]
    return []


def _length_problems(config: RunConfig) -> list[ConfigProblem]:
    problems = []
    budget = config.rollout.max_new_tokens
    longest = config.data.max_response_length
    if budget is not None and budget > longest:
        expected = f"<= data.max_response_length={longest}"
        problems.append(
            ConfigProblem("rollout.max_new_tokens", expected, describe_value(budget), "raise max_response_length")
        )
    overlong = config.algorithm.overlong
    if overlong is not None and overlong.buffer_length > longest:
        expected = f"<= data.max_response_length={longest}"
        problems.append(ConfigProblem("algorithm.overlong.buffer_length", expected, str(overlong.buffer_length)))
    return problems


def _dynamic_sampling_problems(config: RunConfig) -> list[ConfigProblem]:
    if is_pipeline_file(config.pipeline) or config.algorithm.dynamic_sampling is not None:
        return []
    operations = {node.operation for node in get_pipeline(config.pipeline).nodes.values()}
    if DYNAMIC_SAMPLING_OPERATION in operations:
        expected = f"a dynamic_sampling section: pipeline {config.pipeline!r} filters groups"
        return [ConfigProblem("algorithm.dynamic_sampling", expected, "null", "add {epsilon: 0.0, max_draws: 8}")]
    return []


def _baseline_problems(config: RunConfig) -> list[ConfigProblem]:
    estimator = config.algorithm.adv_estimator
    operation = BASELINE_OPERATIONS.get(estimator)
    if operation is None or is_pipeline_file(config.pipeline):
        return []
    if operation not in {node.operation for node in get_pipeline(config.pipeline).nodes.values()}:
        expected = f"a pipeline with a {operation} node: estimator {estimator!r} subtracts a greedy response's reward"
        fix = f"set pipeline={estimator}, or add a {operation} node before the advantages"
        return [ConfigProblem("pipeline", expected, repr(config.pipeline), fix)]
    return []


def _operations(config: RunConfig) -> frozenset[str] | None:
    if is_pipeline_file(config.pipeline):
        return None  # read by the runtime, which binds its operations when the workers start
    return frozenset(node.operation for node in get_pipeline(config.pipeline).nodes.values())


def _check_env(_: object, attribute: attrs.Attribute[Any], value: EnvConfig | None) -> None:
    if value is None:
        return
    if not isinstance(value, EnvConfig):
        raise ConfigError(
            [ConfigProblem(attribute.name, "an env section (rl_core.envs.EnvConfig)", describe_value(value))]
        )
    try:
        check_env_config(value)  # the counts and timeout make_env refuses; the tasks are checked by building it
    except EnvConfigError as error:
        path, found = (
            (f"{attribute.name}.{error.field}", describe_value(getattr(value, error.field)))
            if error.field is not None
            else (attribute.name, "an env section")
        )
        raise ConfigError([ConfigProblem(path, "a value every env runs with", found, str(error))]) from None
    if value.name not in ENVIRONMENTS:
        names = ", ".join(sorted(ENVIRONMENTS)) or "none registered: import the module that registers yours"
        raise ConfigError(
            [ConfigProblem(f"{attribute.name}.name", f"a registered environment ({names})", repr(value.name))]
        )


def _check_embedder(_: object, attribute: attrs.Attribute[Any], value: EmbedderConfig | None) -> None:
    if value is None:
        return
    if not isinstance(value, EmbedderConfig):
        found = describe_value(value)
        raise ConfigError([ConfigProblem(attribute.name, "an embedder section (rl_core.envs.EmbedderConfig)", found)])
    if value.name not in VIDEO_EMBEDDERS:
        names = ", ".join(sorted(VIDEO_EMBEDDERS)) or "none registered"
        expected = f"a registered video embedder ({names})"
        raise ConfigError([ConfigProblem(f"{attribute.name}.name", expected, repr(value.name))])


def _embodied_problems(config: RunConfig) -> list[ConfigProblem]:
    operations = _operations(config)
    if operations is None:
        return []
    problems = []
    reward = config.algorithm.reward
    if operations & EMBODIED_OPERATIONS:
        where = f"pipeline {config.pipeline!r} acts in an environment"
        if config.env is None:
            problems.append(ConfigProblem("env", f"an env section: {where}", "null", "add env: {name: babyai, ...}"))
        if reward is RewardKind.TASK:
            expected = f"srpo or binary: {where}"
            problems.append(ConfigProblem("algorithm.reward", expected, "'task'", "set algorithm.reward=srpo"))
        if reward is RewardKind.SRPO and config.embedder is None:
            expected = "an embedder section: algorithm.reward=srpo embeds every episode's video"
            fix = "add embedder: {name: pixel_pyramid}, or set algorithm.reward=binary"
            problems.append(ConfigProblem("embedder", expected, "null", fix))
        # The accuracy band keeps a varying number of samples, and an edge through the coordinator expects the
        # plan's count: the rebalance node would wait for it (split placement runs the band on the training slots).
        if config.batch.balance_across_ranks is not RankBalancing.NONE:
            expected = f"'none': {where}, and its filtered batches cannot be rebalanced through the coordinator yet"
            found = repr(config.batch.balance_across_ranks.value)
            problems.append(ConfigProblem("batch.balance_across_ranks", expected, found, "remove it"))
        if config.rollout.engine != DEFAULT_ROLLOUT_ENGINE:
            expected = f"{DEFAULT_ROLLOUT_ENGINE!r} (unused): {where}, and its VLA policy samples the actions"
            problems.append(ConfigProblem("rollout.engine", expected, repr(config.rollout.engine), "remove it"))
        if config.algorithm.max_staleness > 0:
            # Split embodied runs are tested synchronously only; their episodes through the staleness buffer are not.
            expected = f"0: {where}, and asynchronous training is built for the language pipelines only"
            found = str(config.algorithm.max_staleness)
            problems.append(ConfigProblem("algorithm.max_staleness", expected, found, "set algorithm.max_staleness=0"))
        if EMBODIED_SAMPLING_OPERATION in operations and config.algorithm.embodied_sampling is None:
            expected = f"an embodied_sampling section: pipeline {config.pipeline!r} filters groups by success rate"
            problems.append(
                ConfigProblem("algorithm.embodied_sampling", expected, "null", "add {lower: 0.1, upper: 0.9}")
            )
        return problems
    where = f"pipeline {config.pipeline!r} has no environment"
    for name, value in (("env", config.env), ("embedder", config.embedder)):
        if value is not None:
            fix = "remove it, or use an embodied pipeline (embodied_srpo)"
            problems.append(ConfigProblem(name, f"null: {where}", f"a {name} section", fix))
    if reward is not RewardKind.TASK:
        problems.append(ConfigProblem("algorithm.reward", f"'task': {where}", repr(reward.value), "remove it"))
    return problems


def _placement_problems(config: RunConfig) -> list[ConfigProblem]:
    # With a reward model on its own slots, reward_slot_problems counts the policy's slots beside it.
    if not config.placement.colocate and not reward_model_slots(config) and config.placement.slots < _MIN_SPLIT_SLOTS:
        expected = f">= {_MIN_SPLIT_SLOTS} with placement.colocate=false (rollout and training get their own slots)"
        return [ConfigProblem("placement.slots", expected, str(config.placement.slots), "add slots or colocate")]
    if config.trainer.launcher == TORCHRUN_LAUNCHER:
        return spmd_problems(config, "trainer.launcher=torchrun")
    return []


def spmd_problems(config: RunConfig, why: str) -> list[ConfigProblem]:
    """What a run launched by torchrun (`why`) cannot do yet: a split placement, whose rollout and training slots
    only Ray's DataCoordinator and weight link join today."""
    if not config.placement.colocate:
        expected = f"true: {why} runs every slot's whole pipeline in its own rank; split placement is Ray-only"
        fix = "set placement.colocate=true, or trainer.launcher=ray and launch without torchrun"
        return [ConfigProblem("placement.colocate", expected, "false", fix)]
    return []


def _batch_problems(config: RunConfig) -> list[ConfigProblem]:
    # Colocated, every stage spans every slot, so the plan is known now; split placement fixes the
    # data-parallel sizes in the planner, which checks the plan again, and here only what holds for any size.
    dp = policy_slots(config) if config.placement.colocate else 1
    if dp < 1:
        return []  # reward_slot_problems names the slots
    try:
        BatchPlan.from_config(config, rollout_dp=dp, train_dp=dp)
    except ConfigError as exc:
        return list(exc.problems)
    return []


@attrs.frozen
class RunConfig:
    """Everything a run needs: data, batch sizes, algorithm, models, rollout, placement, loop and pipeline."""

    data: DataConfig = attrs.field(validator=of_type(DataConfig))
    """The prompt data set."""
    actor: TrainEngineConfig = attrs.field(validator=of_type(TrainEngineConfig))
    """The policy being trained: rl-engines' TrainEngineConfig. The run places it on `placement.device`, gives a
    cosine schedule the run's length unless `schedule.total_steps` is set, and samples with its compute dtype."""
    batch: BatchConfig = attrs.field(factory=BatchConfig, validator=of_type(BatchConfig))
    """Batch sizes; resolved with the placement into a `BatchPlan`."""
    algorithm: AlgorithmConfig = attrs.field(factory=AlgorithmConfig, validator=of_type(AlgorithmConfig))
    """Advantage estimator, policy loss and KL."""
    critic: TrainEngineConfig | None = attrs.field(default=None, validator=optional(of_type(TrainEngineConfig)))
    """The value model, an engine config like the actor's whose model gets a value head; required by pipelines
    with a critic (ppo), null otherwise."""
    reference: TrainEngineConfig | None = attrs.field(default=None, validator=optional(of_type(TrainEngineConfig)))
    """The frozen reference policy's engine (no optimizer or schedule); null uses the actor's engine config."""
    rollout: RolloutConfig = attrs.field(factory=RolloutConfig, validator=of_type(RolloutConfig))
    """Response sampling."""
    placement: PlacementConfig = attrs.field(factory=PlacementConfig, validator=of_type(PlacementConfig))
    """Device slots and how the pipeline is placed on them."""
    trainer: TrainerConfig = attrs.field(factory=TrainerConfig, validator=of_type(TrainerConfig))
    """The training loop."""
    pipeline: str = attrs.field(default="grpo", validator=_check_pipeline)
    """A built-in pipeline (rl_core.graph.PIPELINES: grpo, ppo, dapo, embodied_srpo, ...) or a pipeline YAML file."""
    env: EnvConfig | None = attrs.field(default=None, validator=_check_env)
    """The environment of an embodied pipeline (rl_core.envs.EnvConfig: a registered name, tasks, trials, envs,
    steps, workers, step timeout); required by embodied_srpo, null otherwise. Its tasks are checked by building it
    once in the driver before any worker starts."""
    embedder: EmbedderConfig | None = attrs.field(default=None, validator=_check_embedder)
    """The video embedder of the SRPO progress reward (rl_core.envs.EmbedderConfig); required by
    algorithm.reward=srpo, null otherwise."""
    reward_model: RewardModelConfig | None = attrs.field(default=None, validator=optional(of_type(RewardModelConfig)))
    """A sequence-classification reward model (rl_engines.reward_model.RewardModelConfig) scoring every response,
    run in the reward node's worker or on slots of its own (`reward_model.placement`); its weighted score joins the
    rule reward (algorithm.rule_reward_weight). Null: rule rewards only."""
    judge: JudgeConfig | None = attrs.field(default=None, validator=optional(of_type(JudgeConfig)))
    """A generative judge (rl_engines.judge.JudgeConfig): the run's rollout engine or a server grades each response
    from a prompt template; its weighted verdict joins the sequence score like the reward model's. Null: none."""

    def __attrs_post_init__(self) -> None:
        checks = (
            _critic_problems,
            _length_problems,
            _dynamic_sampling_problems,
            _baseline_problems,
            _embodied_problems,
            engine_problems,
            rollout_problems,
            _placement_problems,
            async_problems,
            reward_problems,
            _batch_problems,
            algorithm_batch_problems,
        )
        problems = [problem for check in checks for problem in check(self)]
        if problems:
            raise ConfigError(problems)
