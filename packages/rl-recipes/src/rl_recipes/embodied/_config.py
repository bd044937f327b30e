"""The SRPO recipe's config: a run config plus the VLA warm start (model size, bot demonstrations, SFT) and the
(task, trial) pools it trains and evaluates on."""

from __future__ import annotations

from pathlib import Path

import attrs

from rl_runtime.config import ConfigError, ConfigProblem, RunConfig
from rl_runtime.config._validators import int_at_least, number_in, of_type, optional

MODEL_DIR = "model"


@attrs.frozen
class VLAWarmStartConfig:
    """The tiny VLA the run starts from: its size, and the supervised fine-tuning on expert demonstrations."""

    output_dir: str = attrs.field(default="outputs/srpo_warm_start", validator=of_type(str))
    """Where the warm-started model folder (`<output_dir>/model`, with its word tokenizer) is written."""
    num_demos: int = attrs.field(default=20, validator=int_at_least(1))
    """Expert (bot) episodes, played on the training pool's (task, trial) pairs."""
    steps: int = attrs.field(default=100, validator=int_at_least(0))
    """Adam steps of behaviour cloning; 0 keeps the random initialisation."""
    batch_size: int = attrs.field(default=32, validator=int_at_least(1))
    """Policy steps (one frame, one action chunk) per SFT batch."""
    lr: float = attrs.field(default=1e-3, validator=number_in(0, low_open=True))
    """SFT learning rate."""
    seed: int = attrs.field(default=0, validator=int_at_least(0))
    """Seed of the initial weights and the SFT batches."""
    chunk_size: int = attrs.field(default=4, validator=int_at_least(1))
    """K: env steps per policy step (action chunk)."""
    hidden_size: int = attrs.field(default=64, validator=int_at_least(8))
    """Width of the VLA's trunk."""
    num_hidden_layers: int = attrs.field(default=2, validator=int_at_least(1))
    """Transformer layers of the trunk."""
    num_attention_heads: int = attrs.field(default=4, validator=int_at_least(1))
    """Attention heads of the trunk."""
    max_instruction_len: int = attrs.field(default=16, validator=int_at_least(1))
    """Longest instruction in words."""

    @property
    def model_dir(self) -> Path:
        """The warm-started model folder."""
        return Path(self.output_dir) / MODEL_DIR


@attrs.frozen
class SRPORecipeConfig(RunConfig):
    """`RunConfig` (pipeline embodied_srpo, env, embedder, ...) plus the warm start and the trial pools."""

    warm_start: VLAWarmStartConfig | None = attrs.field(default=None, validator=optional(of_type(VLAWarmStartConfig)))
    """Build and behaviour-clone the tiny VLA when `actor.model.path` does not exist yet; null: it must exist."""
    train_trials: int = attrs.field(default=16, validator=int_at_least(1))
    """Trials 0..train_trials-1 of every task form the training pool (`data.train_files` is written from it)."""
    heldout_trials: int = attrs.field(default=16, validator=int_at_least(0))
    """The next `heldout_trials` trials of every task form the held-out pool (`data.val_files`)."""
    strip_episodes: int = attrs.field(default=3, validator=int_at_least(0))
    """Held-out episodes drawn in `rollouts.png`, before and after training; 0 draws none."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        problems = []
        if self.env is not None and self.env.num_trials < self.train_trials + self.heldout_trials:
            expected = f">= train_trials + heldout_trials = {self.train_trials + self.heldout_trials}"
            problems.append(ConfigProblem("env.num_trials", expected, str(self.env.num_trials), "raise it"))
        if self.actor.model.path is None:
            problems.append(ConfigProblem("actor.model.path", "the VLA folder (the warm start writes it)", "null"))
        if len(self.data.train_files) != 1 or len(self.data.val_files) > 1:
            expected = "one train file and at most one val file: the recipe writes the (task, trial) pools there"
            found = f"{len(self.data.train_files)} and {len(self.data.val_files)}"
            problems.append(ConfigProblem("data", expected, found))
        if problems:
            raise ConfigError(problems)
