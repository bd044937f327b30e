"""Loading a tokenizer folder: `rl_engines.load_tokenizer`, re-exported here for the recipes."""

from rl_engines import load_tokenizer

__all__ = ["load_tokenizer"]
