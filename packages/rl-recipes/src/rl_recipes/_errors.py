"""The base exception of rl-recipes; specific errors derive from it."""

from __future__ import annotations


class RecipeError(Exception):
    """Base class of every error rl-recipes raises on purpose."""
