"""The agentic recipe's config: a run config plus the task (generated additions), the warm start on tool-using
demonstrations, and the held-out evaluation the driver runs before and after RL."""

from __future__ import annotations

import attrs

from rl_recipes.agentic._task import AgenticTaskConfig
from rl_recipes.agentic._warm_start import AgenticWarmStartConfig
from rl_runtime.config import ConfigError, ConfigProblem, RunConfig
from rl_runtime.config._validators import int_at_least, of_type, optional


@attrs.frozen
class AgenticRecipeConfig(RunConfig):
    """`RunConfig` (pipeline grpo, rollout.workflow tool_calling, ...) plus the agentic recipe's parts."""

    task: AgenticTaskConfig = attrs.field(factory=AgenticTaskConfig, validator=of_type(AgenticTaskConfig))
    """The generated additions and the tokenizer."""
    warm_start: AgenticWarmStartConfig | None = attrs.field(
        default=None, validator=optional(of_type(AgenticWarmStartConfig))
    )
    """Fine-tune the embedded model on tool-using demonstrations when `actor.model.path` does not exist yet; null:
    it must exist."""
    heldout_file: str = attrs.field(default="runs/agentic/data/heldout.jsonl", validator=of_type(str))
    """Where the recipe writes the held-out questions it evaluates on (greedy episodes, before and after RL)."""
    conversations: int = attrs.field(default=8, validator=int_at_least(0))
    """Held-out conversations written to `conversations_before.md` / `conversations_after.md`."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        problems = []
        if self.actor.model.path is None:
            problems.append(ConfigProblem("actor.model.path", "the model folder (the warm start writes it)", "null"))
        if len(self.data.train_files) != 1:
            expected = "one train file: the recipe writes the generated training questions there"
            problems.append(ConfigProblem("data.train_files", expected, str(len(self.data.train_files))))
        if problems:
            raise ConfigError(problems)
