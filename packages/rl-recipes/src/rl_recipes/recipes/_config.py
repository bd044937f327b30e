"""A recipe's configuration: the run config plus the task and an optional supervised warm start."""

from __future__ import annotations

from pathlib import Path

import attrs

from rl_recipes.sft import MODEL_DIR, SFTConfig
from rl_recipes.tasks import MathTaskConfig
from rl_runtime.config import ConfigError, ConfigProblem, RunConfig


@attrs.frozen
class RecipeConfig(RunConfig):
    """`RunConfig` (data, batch, algorithm, models, rollout, placement, trainer, pipeline) plus the recipe's parts."""

    task: MathTaskConfig = attrs.field(factory=MathTaskConfig)
    """The math task: reward function, prompt template, row fields."""
    warm_start: SFTConfig | None = attrs.field(default=None)
    """A supervised warm start run before RL when its model folder does not exist yet; null skips it. Point
    `actor.model.path` at `<warm_start.output_dir>/model` to train the warm-started model."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.tokenizer_path is None:
            expected = "a tokenizer: actor.model.tokenizer_path, or actor.model.path to a folder that holds one"
            raise ConfigError([ConfigProblem("actor.model.tokenizer_path", expected, "null")])

    @property
    def tokenizer_path(self) -> str | None:
        """The tokenizer folder the task encodes prompts with."""
        return self.actor.model.tokenizer_path or self.actor.model.path

    @property
    def warm_start_model(self) -> Path | None:
        """The model folder the warm start writes, or None without one."""
        return None if self.warm_start is None else Path(self.warm_start.output_dir) / MODEL_DIR
