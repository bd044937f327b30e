"""The agentic recipe's parts: multi-turn additions the embedded model must solve with the `calculator` tool, the
task that scores an episode's transcript, the warm start on tool-using demonstrations, the held-out evaluation and
the run folder's report (`rl-recipes train agentic`, `rl_recipes/recipes/agentic.py`)."""

from rl_recipes.agentic._config import AgenticRecipeConfig
from rl_recipes.agentic._evaluate import (
    FAILURE_KINDS,
    EpisodeReport,
    Evaluation,
    GreedyEngine,
    evaluate_model,
    failure_kind,
)
from rl_recipes.agentic._problems import (
    ProblemSpec,
    demonstration,
    generate_problems,
    problem_row,
    read_rows,
    tool_call_text,
    write_rows,
)
from rl_recipes.agentic._report import plot_agentic_curves, write_conversations
from rl_recipes.agentic._task import (
    SUCCESS_METRIC,
    TOOL_CALL_METRIC,
    AgenticTask,
    AgenticTaskConfig,
    AgenticTaskFactory,
    digit_match,
    final_answer,
    score_transcript,
    shaped_reward,
)
from rl_recipes.agentic._warm_start import (
    AgenticWarmStartConfig,
    demonstration_examples,
    masked_conversation,
    sft_config,
    warm_start,
)

__all__ = [
    "FAILURE_KINDS",
    "SUCCESS_METRIC",
    "TOOL_CALL_METRIC",
    "AgenticRecipeConfig",
    "AgenticTask",
    "AgenticTaskConfig",
    "AgenticTaskFactory",
    "AgenticWarmStartConfig",
    "EpisodeReport",
    "Evaluation",
    "GreedyEngine",
    "ProblemSpec",
    "demonstration",
    "demonstration_examples",
    "digit_match",
    "evaluate_model",
    "failure_kind",
    "final_answer",
    "generate_problems",
    "masked_conversation",
    "plot_agentic_curves",
    "problem_row",
    "read_rows",
    "score_transcript",
    "sft_config",
    "shaped_reward",
    "tool_call_text",
    "warm_start",
    "write_conversations",
    "write_rows",
]
