"""Per-token log-probabilities and entropy with bounded memory, from logits or straight from hidden states."""

from rl_core.logprobs._from_hidden import log_probs_and_entropy_from_hidden
from rl_core.logprobs._from_logits import (
    DEFAULT_CHUNK_SIZE,
    entropy_from_logits,
    log_probs_and_entropy_from_logits,
    log_probs_from_logits,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "entropy_from_logits",
    "log_probs_and_entropy_from_hidden",
    "log_probs_and_entropy_from_logits",
    "log_probs_from_logits",
]
