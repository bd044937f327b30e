"""Strict run configuration: frozen attrs sections, YAML plus dotted overrides, and the resolved batch plan.

    config = load_config(RunConfig, "run.yaml", ["actor.optim.lr=1e-6", "batch.prompts_per_step=64"])
    plan = BatchPlan.from_config(config, rollout_dp=4, train_dp=4)

Unknown keys, wrong types, unregistered algorithm names and batch sizes that do not divide across ranks
all raise one `ConfigError` listing every problem with its dotted path and a suggested fix.
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
from rl_runtime.config._schema_models import (
    ActorConfig,
    CriticConfig,
    DataParallel,
    DType,
    LRSchedule,
    ModelSourceConfig,
    OptimConfig,
    ReferenceConfig,
)
from rl_runtime.config._schema_sections import (
    RESUME_AUTO,
    RESUME_NEVER,
    ROLLOUT_ENGINES,
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
    "ROLLOUT_ENGINES",
    "ActorConfig",
    "AlgorithmConfig",
    "ApportionStrategy",
    "BatchConfig",
    "BatchPlan",
    "ConfigError",
    "ConfigProblem",
    "CriticConfig",
    "DType",
    "DataConfig",
    "DataParallel",
    "DeviceKind",
    "DynamicSamplingConfig",
    "KLConfig",
    "KLMode",
    "LRSchedule",
    "ModelSourceConfig",
    "OptimConfig",
    "OverlongConfig",
    "PlacementConfig",
    "RankBalancing",
    "RecomputeOldLogProb",
    "ReferenceConfig",
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
    "structure",
    "unstructure",
]
