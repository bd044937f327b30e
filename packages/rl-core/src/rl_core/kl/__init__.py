"""KL divergence to a reference policy: per-token estimators, coefficient controllers, reward penalty and loss."""

from rl_core.kl._controllers import AdaptiveKLController, FixedKLController, KLController
from rl_core.kl._estimators import abs_kl, abs_plus, k1, k1_plus, k2, k2_plus, k3, k3_plus
from rl_core.kl._loss import kl_loss
from rl_core.kl._penalty import REWARD_KL_COEF_METRIC, REWARD_KL_METRIC, KLPenaltyOutput, apply_kl_penalty
from rl_core.kl._registry import KL_ESTIMATORS, KLEstimator, get_kl_estimator, register_kl_estimator

__all__ = [
    "KL_ESTIMATORS",
    "REWARD_KL_COEF_METRIC",
    "REWARD_KL_METRIC",
    "AdaptiveKLController",
    "FixedKLController",
    "KLController",
    "KLEstimator",
    "KLPenaltyOutput",
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
]
