"""Advantage estimators: GAE, GRPO/Dr. GRPO, RLOO, REINFORCE++, ReMax, OPO, GPG, CPGD and pass@k GRPO.

Every estimator is one function `fn(inputs: AdvantageInputs, *, <its parameters>) -> AdvantageOutput`,
registered by name in `ADVANTAGE_ESTIMATORS`; `get_advantage_estimator(name)` looks one up, and
`BoundEstimator(name, params)` binds one to its parameters once and reads a schema-keyed batch
(`AdvantageInputs.from_batch`).
"""

from rl_core.advantages._cpgd import cpgd
from rl_core.advantages._gae import gae
from rl_core.advantages._gpg import gpg
from rl_core.advantages._grpo import grpo
from rl_core.advantages._opo import opo
from rl_core.advantages._param_check import check_advantage_params
from rl_core.advantages._passk import grpo_passk
from rl_core.advantages._registry import (
    ADVANTAGE_ESTIMATORS,
    BoundEstimator,
    get_advantage_estimator,
    register_advantage_estimator,
)
from rl_core.advantages._reinforce import reinforce_plus_plus, reinforce_plus_plus_baseline
from rl_core.advantages._remax import remax
from rl_core.advantages._rloo import rloo
from rl_core.advantages._types import AdvantageEstimator, AdvantageInputs, AdvantageOutput
from rl_core.advantages._whiten import whiten

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AdvantageEstimator",
    "AdvantageInputs",
    "AdvantageOutput",
    "BoundEstimator",
    "check_advantage_params",
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
]
