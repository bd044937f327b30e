"""A real Ray runtime per test module (2 CPUs, like the CI machines), shared by the Ray-backed tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

NUM_CPUS = 2  # the machines running CI have two cores
WIDE_NUM_CPUS = 4
"""For placements of 4 slots: the 2-core machines run the 4 workers oversubscribed."""


@contextmanager
def _local_ray(num_cpus: int) -> Iterator[None]:
    """A Ray runtime with `num_cpus` logical CPUs for the block, or the one already running when it has as many
    (another package's fixture may have started one in this pytest session)."""
    import ray

    if ray.is_initialized():
        if ray.cluster_resources().get("CPU", 0) < num_cpus:
            pytest.skip(f"a Ray runtime with fewer than {num_cpus} CPUs is already running in this session")
        yield
        return
    # Ray >= 2.5x enables token authentication by default and logs a warning about it; a local test cluster
    # needs none.
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if previous is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[None]:
    with _local_ray(NUM_CPUS):
        yield


@pytest.fixture(scope="module")
def wide_ray_runtime() -> Iterator[None]:
    with _local_ray(WIDE_NUM_CPUS):
        yield
