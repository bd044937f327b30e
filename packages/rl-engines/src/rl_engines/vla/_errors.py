"""The errors of the VLA policy: bad action values or token ids, a head that disagrees with an env, bad words."""

from __future__ import annotations

from rl_engines._errors import EngineError


class VLAError(EngineError, ValueError):
    """A VLA input, token id, tokenizer word or action head is not what the model or the env expects."""
