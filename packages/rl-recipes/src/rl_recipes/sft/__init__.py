"""The supervised warm start: `SFTConfig` and `run_sft`, which trains on prompt + answer + eos with the loss on
the answer tokens, logs per-step metrics through rl-runtime's metrics sinks, exports a Hugging Face folder and
scores the held-out rows. `run_sft` is `load_sft_data`, `build_sft_engine`, then `train_sft`."""

from rl_recipes.sft._config import EMBEDDED_MODEL, LR_SCHEDULES, SFTConfig
from rl_recipes.sft._data import RowOrder, SFTExample, collate, encode_example, encode_examples, split_validation
from rl_recipes.sft._errors import SFTError
from rl_recipes.sft._export import MODEL_DIR, export_model_folder
from rl_recipes.sft._loss import LOG_PROBS_ONLY, response_nll_loss
from rl_recipes.sft._setup import SFTData, load_sft_data
from rl_recipes.sft._train import (
    HELDOUT_METRIC,
    METRICS_FILE,
    VALIDATION_METRIC,
    SFTResult,
    SFTStep,
    build_sft_engine,
    run_sft,
    train_sft,
)

__all__ = [
    "EMBEDDED_MODEL",
    "HELDOUT_METRIC",
    "LOG_PROBS_ONLY",
    "LR_SCHEDULES",
    "METRICS_FILE",
    "MODEL_DIR",
    "VALIDATION_METRIC",
    "RowOrder",
    "SFTConfig",
    "SFTData",
    "SFTError",
    "SFTExample",
    "SFTResult",
    "SFTStep",
    "build_sft_engine",
    "collate",
    "encode_example",
    "encode_examples",
    "export_model_folder",
    "load_sft_data",
    "response_nll_loss",
    "run_sft",
    "split_validation",
    "train_sft",
]
