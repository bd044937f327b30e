"""The error a warm start raises when its inputs cannot be used; the message names the `SFTConfig` field."""

from __future__ import annotations

from rl_recipes._errors import RecipeError


class SFTError(RecipeError, ValueError):
    """An input of the warm start (model, tokenizer, data, batch size) is unusable; raised before training."""
