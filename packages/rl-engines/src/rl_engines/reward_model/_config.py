"""`RewardModelConfig`: where the reward model is, how it reads the policy's tokens, and how its score is used."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from rl_engines.training import TrainConfigError

_OWNER = "RewardModelConfig"
DEFAULT_BATCH_SIZE = 32


class TokenizerMode(enum.Enum):
    """How the reward model reads a response."""

    SAME = "same"
    """The policy's token ids as they are: the reward model's vocabulary must equal the policy's."""
    RETOKENIZE = "retokenize"
    """The response (and prompt) decoded to text by the task, then encoded with the reward model's tokenizer."""


class RewardModelPlacement(enum.Enum):
    """Where the reward model runs."""

    COLOCATE = "colocate"
    """In every worker that runs the reward node, beside the rollout engine (and the actor, when colocated)."""
    SLOT = "slot"
    """On slots of its own (`RewardModelConfig.slots`, taken from the run's slots): one reward-model worker per slot,
    which the reward node sends a step's samples to in one call."""


def _invalid(name: str, expected: str, found: object, fix: str = "") -> TrainConfigError:
    text = f"{_OWNER}.{name} must be {expected}, got {found!r}"
    return TrainConfigError(f"{text}; {fix}" if fix else text, field=name, expected=expected, found=found, fix=fix)


@dataclass(frozen=True)
class RewardModelConfig:
    """A sequence-classification reward model (`AutoModelForSequenceClassification`, one label) scoring every
    response; its score, times `weight`, is added to the sequence score (see `algorithm.rule_reward_weight`)."""

    path: str
    """A local Hugging Face folder with the model (one label) and its tokenizer, as `rl-recipes rm` writes."""
    tokenizer: TokenizerMode = TokenizerMode.SAME
    """"same": score the policy's token ids (vocabularies must match, checked before the workers start);
    "retokenize": decode prompt and response with the task and encode the text with the reward model's tokenizer."""
    batch_size: int = DEFAULT_BATCH_SIZE
    """Sequences per forward pass."""
    weight: float = 1.0
    """Multiplies the reward model's score before it joins the sequence score."""
    placement: RewardModelPlacement = RewardModelPlacement.COLOCATE
    """"colocate" (in the reward node's worker, beside the rollout engine) or "slot" (on `slots` slots of its own,
    taken from the run's `placement.slots`; Ray launcher only)."""
    slots: int = 1
    """Slots of the reward model's own workers with `placement: slot` (each holds a copy of the model and scores the
    samples of the reward-node ranks given to it: rank r on slot r % slots); 1 with "colocate"."""
    max_length: int | None = None
    """Longest input in tokens; longer ones keep their last `max_length` tokens (counted in
    `reward/model_truncated_frac`). None: the model's `max_position_embeddings`."""

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise _invalid("path", "a non-empty str (a model folder)", self.path)
        if not isinstance(self.tokenizer, TokenizerMode):
            raise _invalid("tokenizer", "'same' or 'retokenize'", self.tokenizer)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise _invalid("batch_size", "an int >= 1", self.batch_size)
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not math.isfinite(self.weight):
            raise _invalid("weight", "a finite number", self.weight)
        if not isinstance(self.placement, RewardModelPlacement):
            raise _invalid("placement", "'colocate' or 'slot'", self.placement)
        if isinstance(self.slots, bool) or not isinstance(self.slots, int) or self.slots < 1:
            raise _invalid("slots", "an int >= 1", self.slots)
        if self.max_length is not None and (
            isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 2
        ):
            raise _invalid("max_length", "null or an int >= 2", self.max_length)
