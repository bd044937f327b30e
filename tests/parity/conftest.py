"""Parity tests compare rl-core with verl's `core_algos` on the same random inputs.

They run in `nox -s parity`, a virtualenv holding verl 0.9.1 beside rl-core; there
`RL_PARITY_REQUIRED=1` turns a missing verl into a failure instead of a skip.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

PARITY_TOLERANCE = 1e-6


@pytest.fixture(scope="session")
def core_algos() -> ModuleType:
    """verl's `verl.trainer.ppo.core_algos`, or a skip (a failure under RL_PARITY_REQUIRED=1)."""
    try:
        return importlib.import_module("verl.trainer.ppo.core_algos")
    except ImportError as exc:
        if os.environ.get("RL_PARITY_REQUIRED") == "1":
            pytest.fail(f"verl is required for parity tests but failed to import: {exc}")
        pytest.skip(f"verl not installed: {exc}")
