"""Tasks: GSM8K-format math data loading, ground-truth extraction and prompt building."""

from rl_recipes.tasks._loading import (
    ANSWER_FIELD,
    QUESTION_FIELD,
    DatasetError,
    MathSample,
    extract_ground_truth,
    load_math_dataset,
)
from rl_recipes.tasks._prompt import CHAT_INSTRUCTION, PLAIN_TEMPLATE, build_prompt

__all__ = [
    "ANSWER_FIELD",
    "CHAT_INSTRUCTION",
    "PLAIN_TEMPLATE",
    "QUESTION_FIELD",
    "DatasetError",
    "MathSample",
    "build_prompt",
    "extract_ground_truth",
    "load_math_dataset",
]
