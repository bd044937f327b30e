"""The public names of rl_runtime.config are pinned."""

from __future__ import annotations

import rl_runtime.config as config

PUBLIC = [
    "UNWIRED_ROLLOUT_ENGINES", "AlgorithmConfig", "ApportionStrategy", "BatchConfig", "BatchPlan", "ConfigError",
    "ConfigProblem", "DataConfig", "DeviceKind", "DynamicSamplingConfig", "EmbodiedSamplingConfig", "KLConfig",
    "KLMode", "OverlongConfig", "PlacementConfig", "RankBalancing", "RecomputeOldLogProb", "RewardKind",
    "RolloutConfig", "RolloutCorrectionConfig", "RunConfig", "TrainerConfig", "WeightSyncKind", "config_from_dict",
    "dump_config", "dump_config_yaml", "load_config", "resolve_policy_loss", "resolve_weight_sync",
    "weight_sync_transports",
]  # fmt: skip


def test_public_api_is_pinned() -> None:
    assert sorted(config.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(config, name), name
