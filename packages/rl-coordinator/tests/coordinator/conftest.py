"""One real Ray runtime for the Ray tests of this folder (starting one costs seconds), and one coordinator; the
folder's helper modules made importable by its tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

NUM_CPUS = 2  # the machines running CI have two cores


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[None]:
    import ray

    # Ray >= 2.5x enables token authentication by default and logs a warning about it; a local test cluster
    # needs none.
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=NUM_CPUS, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if previous is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous


@pytest.fixture(scope="module")
def coordinator(ray_runtime: None) -> Any:
    """A coordinator shared by a module's tests; each test uses its own edge names."""
    from rl_coordinator.coordinator import start_coordinator

    return start_coordinator()
