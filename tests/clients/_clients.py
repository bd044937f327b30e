"""What the client tests share: the server's key, importing a client module (skip or fail), the prompt and the
sharing strategy that lets a CPU tensor's handle reach our server."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import pytest
import torch.multiprocessing

API_KEY = "conformance-key"
PROMPT = [5, 17, 42, 9, 77]
GREEDY = {"max_new_tokens": 4, "temperature": 0.0}


def client_module(name: str) -> ModuleType:
    """Import a client module, or skip (a failure under RL_CLIENTS_REQUIRED=1)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if os.environ.get("RL_CLIENTS_REQUIRED") == "1":
            pytest.fail(f"{name} is required in `nox -s conformance` but failed to import: {exc}")
        pytest.skip(f"{name} not importable here (run `nox -s conformance`): {exc}")


@contextmanager
def file_system_sharing() -> Iterator[None]:
    """torch's `file_system` sharing strategy while the block runs.

    The clients pickle tensors with `ForkingPickler`; under torch's default `file_descriptor` strategy a CPU
    tensor travels as a descriptor that only a process the sender started (sharing its multiprocessing authkey)
    can fetch, which is how SGLang receives it when the adapter launched SGLang itself. Our server is started on its
    own, so a CPU sender names the shared-memory file instead (GPU tensors travel as CUDA IPC handles either way).
    """
    previous = torch.multiprocessing.get_sharing_strategy()
    torch.multiprocessing.set_sharing_strategy("file_system")
    try:
        yield
    finally:
        torch.multiprocessing.set_sharing_strategy(previous)


CLIENT_IMPORT_WARNINGS = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),  # e.g. sglang's "Only CUDA, HIP and XPU support AWQ"
]
"""The clients' own import-time warnings, which the suite's `error` filter would turn into failures."""
