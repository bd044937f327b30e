"""Tasks: GSM8K-format math data loading, ground-truth extraction, prompt and response formats, and `MathTask`,
the runtime's view of the task (prompt token ids in, rule rewards out)."""

from rl_recipes.tasks._loading import (
    ANSWER_FIELD,
    QUESTION_FIELD,
    DatasetError,
    MathSample,
    extract_ground_truth,
    load_math_dataset,
)
from rl_recipes.tasks._math_task import (
    FAILURE_METRIC,
    GROUND_TRUTH_KEY,
    MathTask,
    MathTaskConfig,
    MathTaskFactory,
    reward_failures,
)
from rl_recipes.tasks._prompt import (
    CHAT_INSTRUCTION,
    PLAIN_TEMPLATE,
    RESPONSE_PREFIX,
    build_prompt,
    encode_prompt,
    response_text,
)
from rl_recipes.tasks._tokenizer import load_tokenizer

__all__ = [
    "ANSWER_FIELD",
    "CHAT_INSTRUCTION",
    "FAILURE_METRIC",
    "GROUND_TRUTH_KEY",
    "PLAIN_TEMPLATE",
    "QUESTION_FIELD",
    "RESPONSE_PREFIX",
    "DatasetError",
    "MathSample",
    "MathTask",
    "MathTaskConfig",
    "MathTaskFactory",
    "build_prompt",
    "encode_prompt",
    "extract_ground_truth",
    "load_math_dataset",
    "load_tokenizer",
    "response_text",
    "reward_failures",
]
