"""The public names of rl_runtime.config are pinned."""

from __future__ import annotations

import rl_runtime.config as config

PUBLIC = [
    "PIPELINE_FILE_SUFFIXES", "RESUME_AUTO", "RESUME_NEVER", "UNWIRED_ROLLOUT_ENGINES",
    "AlgorithmConfig", "ApportionStrategy", "BatchConfig", "BatchPlan", "ConfigError",
    "ConfigProblem", "DataConfig", "DeviceKind", "DynamicSamplingConfig",
    "KLConfig", "KLMode", "OverlongConfig", "PlacementConfig",
    "RankBalancing", "RecomputeOldLogProb", "RolloutConfig", "RunConfig",
    "Scalar", "TrainerConfig", "apply_overrides", "config_from_dict", "default_config_path", "dump_config",
    "dump_config_yaml", "is_pipeline_file", "load_config", "read_config_file", "reference_engine_config",
    "structure", "unstructure",
]  # fmt: skip


def test_public_api_is_pinned() -> None:
    assert sorted(config.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(config, name), name
