"""Test helpers shipped with rl-core so every package checks its imports the same way."""

from rl_core.testing._imports import modules_loaded_by_import, public_modules, third_party

__all__ = ["modules_loaded_by_import", "public_modules", "third_party"]
