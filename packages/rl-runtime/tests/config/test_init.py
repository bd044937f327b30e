"""The public names of rl_runtime.config are pinned."""

from __future__ import annotations

import rl_runtime.config as config

PUBLIC = [
    "PIPELINE_FILE_SUFFIXES", "RESUME_AUTO", "RESUME_NEVER", "ROLLOUT_ENGINES",
    "ActorConfig", "AlgorithmConfig", "ApportionStrategy", "BatchConfig", "BatchPlan", "ConfigError",
    "ConfigProblem", "CriticConfig", "DType", "DataConfig", "DataParallel", "DeviceKind", "DynamicSamplingConfig",
    "KLConfig", "KLMode", "LRSchedule", "ModelSourceConfig", "OptimConfig", "OverlongConfig", "PlacementConfig",
    "RankBalancing", "RecomputeOldLogProb", "ReferenceConfig", "RolloutConfig", "RunConfig",
    "Scalar", "TrainerConfig", "apply_overrides", "config_from_dict", "default_config_path", "dump_config",
    "dump_config_yaml", "is_pipeline_file", "load_config", "read_config_file", "structure", "unstructure",
]  # fmt: skip


def test_public_api_is_pinned() -> None:
    assert sorted(config.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(config, name), name
