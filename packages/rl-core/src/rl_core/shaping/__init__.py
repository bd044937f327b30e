"""Batch filters and reward shaping: DAPO dynamic sampling, the accuracy band, DAPO's overlong penalty,
placing sequence scores on tokens, and SRPO's progress reward with its DBSCAN."""

from rl_core.shaping._dbscan import dbscan
from rl_core.shaping._dynamic_sampling import GroupFilterResult, accuracy_band_mask, dynamic_sampling_mask
from rl_core.shaping._overlong import overlong_penalty
from rl_core.shaping._placement import scores_to_token_level
from rl_core.shaping._srpo import srpo_progress_reward

__all__ = [
    "GroupFilterResult",
    "accuracy_band_mask",
    "dbscan",
    "dynamic_sampling_mask",
    "overlong_penalty",
    "scores_to_token_level",
    "srpo_progress_reward",
]
