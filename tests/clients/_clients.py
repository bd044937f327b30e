"""What the client tests share: the server's key and importing a client module (skip or fail)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

API_KEY = "conformance-key"


def client_module(name: str) -> ModuleType:
    """Import a client module, or skip (a failure under RL_CLIENTS_REQUIRED=1)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if os.environ.get("RL_CLIENTS_REQUIRED") == "1":
            pytest.fail(f"{name} is required in `nox -s conformance` but failed to import: {exc}")
        pytest.skip(f"{name} not importable here (run `nox -s conformance`): {exc}")
