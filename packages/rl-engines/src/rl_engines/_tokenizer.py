"""Loading a tokenizer folder so that it encodes exactly as it did when it was saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOKENIZER_CONFIG = "tokenizer_config.json"
GENERIC_CLASSES = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})
"""Classes that mean "the tokenizer is tokenizer.json as written". transformers 5's AutoTokenizer swaps them for
the model type's own class when config.json sits in the same folder (a qwen2 model gets Qwen2Tokenizer, which
rebuilds a different pre-tokenizer), so these folders load through the generic class instead."""


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer saved in folder `path`: its declared generic class when it has one, else AutoTokenizer's pick."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = Path(path)
    config_file = folder / TOKENIZER_CONFIG
    declared = json.loads(config_file.read_text()).get("tokenizer_class") if config_file.is_file() else None
    if declared in GENERIC_CLASSES:
        return PreTrainedTokenizerFast.from_pretrained(str(folder))
    return AutoTokenizer.from_pretrained(str(folder))
