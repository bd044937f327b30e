"""Strict run configuration: frozen attrs sections, YAML plus dotted overrides, and the resolved batch plan.

    config = load_config(RunConfig, "run.yaml", ["actor.optimizer.lr=1e-6", "batch.prompts_per_step=64"])
    plan = BatchPlan.from_config(config, rollout_dp=4, train_dp=4)

Unknown keys, wrong types, unregistered algorithm names and batch sizes that do not divide across ranks
all raise one `ConfigError` listing every problem with its dotted path and a suggested fix. The engine
sections (`actor`, `critic`, `reference`) are rl-engines' own `TrainEngineConfig`; its checks come out as
problems of the dotted field too.
"""

from rl_runtime.config._batch_plan import BatchPlan
from rl_runtime.config._converter import structure, unstructure
from rl_runtime.config._errors import ConfigError, ConfigProblem
from rl_runtime.config._loading import (
    config_from_dict,
    default_config_path,
    dump_config,
    dump_config_yaml,
    load_config,
    read_config_file,
)
from rl_runtime.config._overrides import apply_overrides
from rl_runtime.config._schema import PIPELINE_FILE_SUFFIXES, RunConfig, is_pipeline_file
from rl_runtime.config._schema_algorithm import (
    AlgorithmConfig,
    DynamicSamplingConfig,
    KLConfig,
    KLMode,
    OverlongConfig,
    RecomputeOldLogProb,
)
from rl_runtime.config._schema_engines import reference_engine_config
from rl_runtime.config._schema_sections import (
    RESUME_AUTO,
    RESUME_NEVER,
    UNWIRED_ROLLOUT_ENGINES,
    ApportionStrategy,
    BatchConfig,
    DataConfig,
    DeviceKind,
    PlacementConfig,
    RankBalancing,
    RolloutConfig,
    TrainerConfig,
)
from rl_runtime.config._types import Scalar

__all__ = [
    "PIPELINE_FILE_SUFFIXES",
    "RESUME_AUTO",
    "RESUME_NEVER",
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
    "KLConfig",
    "KLMode",
    "OverlongConfig",
    "PlacementConfig",
    "RankBalancing",
    "RecomputeOldLogProb",
    "RolloutConfig",
    "RunConfig",
    "Scalar",
    "TrainerConfig",
    "apply_overrides",
    "config_from_dict",
    "default_config_path",
    "dump_config",
    "dump_config_yaml",
    "is_pipeline_file",
    "load_config",
    "read_config_file",
    "reference_engine_config",
    "structure",
    "unstructure",
]
