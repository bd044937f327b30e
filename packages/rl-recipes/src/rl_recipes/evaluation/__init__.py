"""Evaluation: held-out exact match and pass@k of a model or engine on a GSM8K-format math task, through
rl-runtime's evaluation path (`rl_runtime.evaluation`), the one the Trainer's validation runs; and the success rate
per task of a VLA folder in an env (`evaluate_policy`)."""

from rl_recipes.evaluation._embodied import EmbodiedEvaluation, evaluate_policy
from rl_recipes.evaluation._math import CORRECT_SCORE, EvalResult, PromptResult, evaluate_math
from rl_runtime.evaluation import pass_at_k

__all__ = [
    "CORRECT_SCORE",
    "EmbodiedEvaluation",
    "EvalResult",
    "PromptResult",
    "evaluate_math",
    "evaluate_policy",
    "pass_at_k",
]
