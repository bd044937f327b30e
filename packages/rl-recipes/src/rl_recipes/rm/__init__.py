"""`rl-recipes rm`: a reward model trained by Bradley-Terry on preference pairs, written as a Hugging Face folder
that a run config's `reward_model.path` loads (`rl_engines.reward_model`)."""

from rl_recipes.rm._config import EMBEDDED_MODEL, RMConfig
from rl_recipes.rm._data import (
    PAIR_FIELDS,
    PreferenceDataError,
    PreferencePair,
    generate_math_pairs,
    load_pairs,
    write_pairs,
    wrong_answer,
)
from rl_recipes.rm._loss import bradley_terry_loss, pairwise_accuracy
from rl_recipes.rm._train import MODEL_DIR, SUMMARY_FILE, RMResult, encode_pair, run_rm

__all__ = [
    "EMBEDDED_MODEL",
    "MODEL_DIR",
    "PAIR_FIELDS",
    "SUMMARY_FILE",
    "PreferenceDataError",
    "PreferencePair",
    "RMConfig",
    "RMResult",
    "bradley_terry_loss",
    "encode_pair",
    "generate_math_pairs",
    "load_pairs",
    "pairwise_accuracy",
    "run_rm",
    "write_pairs",
    "wrong_answer",
]
