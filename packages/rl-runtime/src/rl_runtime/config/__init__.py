"""Strict run configuration: frozen attrs sections, YAML plus dotted overrides, and the resolved batch plan.

    config = load_config(RunConfig, "run.yaml", ["actor.optimizer.lr=1e-6", "batch.prompts_per_step=64"])
    plan = BatchPlan.from_config(config, rollout_dp=4, train_dp=4)

Unknown keys, wrong types, unregistered algorithm names and batch sizes that do not divide across ranks
all raise one `ConfigError` listing every problem with its dotted path and a suggested fix. The engine
sections (`actor`, `critic`, `reference`) are rl-engines' own `TrainEngineConfig`; its checks come out as
problems of the dotted field too.
"""

from rl_runtime.config._batch_plan import BatchPlan
from rl_runtime.config._errors import ConfigError, ConfigProblem
from rl_runtime.config._loading import config_from_dict, dump_config, dump_config_yaml, load_config
from rl_runtime.config._schema import RunConfig
from rl_runtime.config._schema_algorithm import (
    AlgorithmConfig,
    DynamicSamplingConfig,
    EmbodiedSamplingConfig,
    KLConfig,
    KLMode,
    OverlongConfig,
    RecomputeOldLogProb,
    RewardKind,
    RolloutCorrectionConfig,
    resolve_policy_loss,
)
from rl_runtime.config._schema_rollout import resolve_weight_sync, weight_sync_transports
from rl_runtime.config._schema_sections import (
    UNWIRED_ROLLOUT_ENGINES,
    ApportionStrategy,
    BatchConfig,
    DataConfig,
    DeviceKind,
    PlacementConfig,
    RankBalancing,
    RolloutConfig,
    TrainerConfig,
    WeightSyncKind,
)

__all__ = [
    "UNWIRED_ROLLOUT_ENGINES",
    "AlgorithmConfig",
    "ApportionStrategy",
    "BatchConfig",
    "BatchPlan",
    "ConfigError",
    "ConfigProblem",
    "DataConfig",
    "DeviceKind",
    "DynamicSamplingConfig",
    "EmbodiedSamplingConfig",
    "KLConfig",
    "KLMode",
    "OverlongConfig",
    "PlacementConfig",
    "RankBalancing",
    "RecomputeOldLogProb",
    "RewardKind",
    "RolloutConfig",
    "RolloutCorrectionConfig",
    "RunConfig",
    "TrainerConfig",
    "WeightSyncKind",
    "config_from_dict",
    "dump_config",
    "dump_config_yaml",
    "load_config",
    "resolve_policy_loss",
    "resolve_weight_sync",
    "weight_sync_transports",
]
