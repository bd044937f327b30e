"""rl-engines: training engines (FSDP2) and rollout engines, with trainer-to-rollout weight sync."""

from rl_engines._errors import EngineError
from rl_engines._tokenizer import load_tokenizer

__version__ = "0.1.0"

__all__ = ["EngineError", "__version__", "load_tokenizer"]
