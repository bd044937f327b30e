"""A real Ray runtime per test module (2 CPUs, like the CI machines), shared by the Ray-backed tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

NUM_CPUS = 2  # the machines running CI have two cores


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[None]:
    import ray

    if ray.is_initialized():  # another package's fixture already started one in this pytest session
        yield
        return
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
