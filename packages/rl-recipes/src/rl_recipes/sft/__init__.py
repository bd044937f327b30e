"""The supervised warm start: `SFTConfig` and `run_sft`, which trains on prompt + answer + eos with the loss on
the answer tokens, logs per-step metrics, exports a Hugging Face folder and scores the held-out rows."""

from rl_recipes.sft._config import EMBEDDED_MODEL, LR_SCHEDULES, SFTConfig
from rl_recipes.sft._data import RowOrder, SFTExample, collate, encode_example, encode_examples, split_validation
from rl_recipes.sft._errors import SFTError
from rl_recipes.sft._export import MODEL_DIR, export_model_folder
from rl_recipes.sft._loss import LOG_PROBS_ONLY, response_nll_loss
from rl_recipes.sft._train import HELDOUT_METRIC, METRICS_FILE, VALIDATION_METRIC, SFTResult, SFTStep, run_sft

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
    "SFTError",
    "SFTExample",
    "SFTResult",
    "SFTStep",
    "collate",
    "encode_example",
    "encode_examples",
    "export_model_folder",
    "response_nll_loss",
    "run_sft",
    "split_validation",
]
