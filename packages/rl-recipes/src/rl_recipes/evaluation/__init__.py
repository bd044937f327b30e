"""Evaluation: held-out exact match and pass@k of a model or engine on a GSM8K-format math task."""

from rl_recipes.evaluation._math import CORRECT_SCORE, EvalResult, PromptResult, evaluate_math
from rl_recipes.evaluation._pass_at_k import pass_at_k

__all__ = ["CORRECT_SCORE", "EvalResult", "PromptResult", "evaluate_math", "pass_at_k"]
