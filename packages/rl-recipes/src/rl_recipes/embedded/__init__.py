"""The embedded default's data pieces: a synthetic arithmetic dataset, a local tokenizer and a tiny model."""

from rl_recipes.embedded._dataset import (
    DEFAULT_DATASET_SEED,
    DEFAULT_HELDOUT_SIZE,
    DEFAULT_SPEC,
    DEFAULT_TRAIN_SIZE,
    HELDOUT_FILE,
    OPERATIONS,
    TRAIN_FILE,
    ArithmeticSpec,
    format_row,
    generate_arithmetic_splits,
    write_arithmetic_dataset,
    write_default_dataset,
)
from rl_recipes.embedded._model import build_embedded_model, embedded_model_config
from rl_recipes.embedded._tokenizer import (
    EMBEDDED_TOOLS_TOKENIZER,
    SPECIAL_TOKENS,
    TOOL_WORD_TOKENS,
    build_embedded_tokenizer,
    load_embedded_tokenizer,
    save_embedded_tokenizer,
)

__all__ = [
    "DEFAULT_DATASET_SEED",
    "DEFAULT_HELDOUT_SIZE",
    "DEFAULT_SPEC",
    "DEFAULT_TRAIN_SIZE",
    "EMBEDDED_TOOLS_TOKENIZER",
    "HELDOUT_FILE",
    "OPERATIONS",
    "SPECIAL_TOKENS",
    "TOOL_WORD_TOKENS",
    "TRAIN_FILE",
    "ArithmeticSpec",
    "build_embedded_model",
    "build_embedded_tokenizer",
    "embedded_model_config",
    "format_row",
    "generate_arithmetic_splits",
    "load_embedded_tokenizer",
    "save_embedded_tokenizer",
    "write_arithmetic_dataset",
    "write_default_dataset",
]
