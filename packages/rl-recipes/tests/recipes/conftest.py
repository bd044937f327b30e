"""The recipe tests' shared pieces: their helper modules made importable (the suite runs with
`--import-mode=importlib`), and one Ray cluster per test module that asks for it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

NUM_CPUS = 2
"""The Ray cluster's CPUs: the two slots the recipe configs place."""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=NUM_CPUS, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
