"""Pins every public module's `__all__`: adding or removing a public name is a reviewed change."""

from __future__ import annotations

import importlib

import pytest

from rl_core.testing import public_modules

PUBLIC_API: dict[str, list[str]] = {
    "rl_core": [
        "DuplicateNameError",
        "PLUGIN_GROUP",
        "PluginError",
        "RLCoreError",
        "ShapeError",
        "UnknownNameError",
        "__version__",
        "as_bool_mask",
        "check_tensor",
        "load_plugins",
        "lookup",
        "nearest_name",
        "registrar",
    ],
    "rl_core.advantages": [
        "ADVANTAGE_ESTIMATORS",
        "AdvantageEstimator",
        "AdvantageInputs",
        "AdvantageOutput",
        "cpgd",
        "gae",
        "get_advantage_estimator",
        "gpg",
        "grpo",
        "grpo_passk",
        "opo",
        "register_advantage_estimator",
        "reinforce_plus_plus",
        "reinforce_plus_plus_baseline",
        "remax",
        "rloo",
        "whiten",
    ],
    "rl_core.graph": [
        "BUILTIN_OPERATIONS",
        "CrossDependency",
        "CycleError",
        "DuplicateGraphError",
        "DuplicateNodeError",
        "GraphError",
        "GraphSpecError",
        "Node",
        "NodeRole",
        "PARAM_COUNT_KEY",
        "PIPELINES",
        "Pipeline",
        "ROLLOUT_ROLES",
        "SplitResult",
        "SplitRule",
        "TaskGraph",
        "UnknownDependencyError",
        "estimate_weight",
        "get_pipeline",
        "is_irreducible",
        "register_pipeline",
        "split_graph",
        "split_plan",
        "validate_plan",
    ],
    "rl_core.kl": [
        "AdaptiveKLController",
        "FixedKLController",
        "KLController",
        "KLEstimator",
        "KLPenaltyOutput",
        "KL_ESTIMATORS",
        "REWARD_KL_COEF_METRIC",
        "REWARD_KL_METRIC",
        "abs_kl",
        "abs_plus",
        "apply_kl_penalty",
        "get_kl_estimator",
        "k1",
        "k1_plus",
        "k2",
        "k2_plus",
        "k3",
        "k3_plus",
        "kl_loss",
        "register_kl_estimator",
    ],
    "rl_core.logprobs": [
        "DEFAULT_CHUNK_SIZE",
        "entropy_from_logits",
        "log_probs_and_entropy_from_hidden",
        "log_probs_and_entropy_from_logits",
        "log_probs_from_logits",
    ],
    "rl_core.losses": [
        "AGGREGATIONS",
        "LossNormalizer",
        "POLICY_LOSSES",
        "PolicyLoss",
        "PolicyLossInputs",
        "PolicyLossOutput",
        "RolloutCorrection",
        "ValueLossOutput",
        "aggregate_loss",
        "cispo",
        "clip_cov",
        "clipped_value_loss",
        "cpgd",
        "geo_mean",
        "get_aggregation",
        "get_policy_loss",
        "gpg",
        "gspo",
        "kl_cov",
        "ppo",
        "register_aggregation",
        "register_policy_loss",
        "rollout_correction",
        "sapo",
        "with_rollout_correction",
    ],
    "rl_core.shaping": [
        "GroupFilterResult",
        "accuracy_band_mask",
        "dbscan",
        "dynamic_sampling_mask",
        "overlong_penalty",
        "scores_to_token_level",
        "srpo_progress_reward",
    ],
    "rl_core.testing": [
        "modules_loaded_by_import",
        "public_modules",
        "third_party",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_all_is_pinned_and_resolvable(module: str) -> None:
    imported = importlib.import_module(module)
    assert sorted(imported.__all__) == PUBLIC_API[module]
    missing = [name for name in imported.__all__ if not hasattr(imported, name)]
    assert missing == []


def test_every_public_module_is_pinned() -> None:
    assert sorted(public_modules("rl_core")) == sorted(PUBLIC_API)
