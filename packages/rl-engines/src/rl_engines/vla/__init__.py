"""A vision-language-action policy for embodied RL: OpenVLA's action tokenizer and its quantile normalisation."""

from rl_engines.vla._action_tokenizer import ActionTokenizer, normalize, unnormalize
from rl_engines.vla._errors import VLAError

__all__ = ["ActionTokenizer", "VLAError", "normalize", "unnormalize"]
