"""Policy, value and auxiliary losses, and the aggregation that reduces them to a scalar.

Every policy loss is one function `fn(inputs: PolicyLossInputs, *, aggregation="token-mean",
normalizer=None, <its parameters>) -> PolicyLossOutput`, registered by name in `POLICY_LOSSES`:
ppo, decoupled_ppo (AReaL's, for asynchronous training), gspo, cispo, sapo, gpg, clip_cov, kl_cov,
geo_mean and cpgd. `with_rollout_correction` wraps any
of them with the rollout importance-sampling correction (`rollout_correction`). A loss registered with
`advantage_multiple=True` (ppo, decoupled_ppo) is 0, with a zero gradient, where the advantage is 0
(`is_advantage_multiple`); `rl_core.objectives.PolicyObjective` composes a policy loss with KL and entropy terms.
"""

from rl_core.losses._aggregation import (
    AGGREGATION_DIVISORS,
    AGGREGATIONS,
    LossNormalizer,
    aggregate_loss,
    aggregation_divisor,
    get_aggregation,
    register_aggregation,
    rescaled_normalizer,
)
from rl_core.losses._cispo import cispo
from rl_core.losses._clip_cov import clip_cov
from rl_core.losses._cpgd import cpgd
from rl_core.losses._decoupled_ppo import DEFAULT_BEHAV_IMP_WEIGHT_CAP, decoupled_ppo
from rl_core.losses._geo_mean import geo_mean
from rl_core.losses._gpg import gpg
from rl_core.losses._gspo import gspo
from rl_core.losses._kl_cov import kl_cov
from rl_core.losses._param_check import check_policy_loss_params
from rl_core.losses._ppo import ppo
from rl_core.losses._registry import (
    ADVANTAGE_MULTIPLE_LOSSES,
    POLICY_LOSSES,
    get_policy_loss,
    is_advantage_multiple,
    register_policy_loss,
)
from rl_core.losses._rollout_correction import (
    DEFAULT_UPPER as ROLLOUT_CORRECTION_DEFAULT_UPPER,
)
from rl_core.losses._rollout_correction import (
    LEVELS as ROLLOUT_CORRECTION_LEVELS,
)
from rl_core.losses._rollout_correction import (
    MODES as ROLLOUT_CORRECTION_MODES,
)
from rl_core.losses._rollout_correction import (
    RolloutCorrection,
    rollout_correction,
    with_rollout_correction,
)
from rl_core.losses._sapo import sapo
from rl_core.losses._types import PolicyLoss, PolicyLossInputs, PolicyLossOutput
from rl_core.losses._value import ValueLossOutput, clipped_value_loss

__all__ = [
    "ADVANTAGE_MULTIPLE_LOSSES",
    "AGGREGATIONS",
    "AGGREGATION_DIVISORS",
    "DEFAULT_BEHAV_IMP_WEIGHT_CAP",
    "POLICY_LOSSES",
    "ROLLOUT_CORRECTION_DEFAULT_UPPER",
    "ROLLOUT_CORRECTION_LEVELS",
    "ROLLOUT_CORRECTION_MODES",
    "LossNormalizer",
    "PolicyLoss",
    "PolicyLossInputs",
    "PolicyLossOutput",
    "RolloutCorrection",
    "ValueLossOutput",
    "aggregate_loss",
    "aggregation_divisor",
    "check_policy_loss_params",
    "cispo",
    "clip_cov",
    "clipped_value_loss",
    "cpgd",
    "decoupled_ppo",
    "geo_mean",
    "get_aggregation",
    "get_policy_loss",
    "gpg",
    "gspo",
    "is_advantage_multiple",
    "kl_cov",
    "ppo",
    "register_aggregation",
    "register_policy_loss",
    "rescaled_normalizer",
    "rollout_correction",
    "sapo",
    "with_rollout_correction",
]
