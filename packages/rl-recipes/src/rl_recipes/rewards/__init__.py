"""Reward functions: the registry, GSM8K rule rewards, the plug-in loader and the per-sample safe runner."""

from rl_recipes.rewards._builtin import format_reward, gsm8k_exact_match, math_verify_reward
from rl_recipes.rewards._extract import (
    ABS_TOLERANCE,
    REL_TOLERANCE,
    extract_answer,
    has_answer_format,
    normalize_number,
    numbers_match,
)
from rl_recipes.rewards._loading import RewardLoadError, load_reward_function
from rl_recipes.rewards._registry import REWARD_FUNCTIONS, RewardFunction, get_reward_function, register_reward
from rl_recipes.rewards._runner import FAILURE_KINDS, RewardResults, RewardRunner, RewardSample

__all__ = [
    "ABS_TOLERANCE",
    "FAILURE_KINDS",
    "REL_TOLERANCE",
    "REWARD_FUNCTIONS",
    "RewardFunction",
    "RewardLoadError",
    "RewardResults",
    "RewardRunner",
    "RewardSample",
    "extract_answer",
    "format_reward",
    "get_reward_function",
    "gsm8k_exact_match",
    "has_answer_format",
    "load_reward_function",
    "math_verify_reward",
    "normalize_number",
    "numbers_match",
    "register_reward",
]
