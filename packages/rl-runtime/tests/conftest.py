"""One real Ray runtime for the Ray-backed tests of this session (2 CPUs, like the CI machines), shared from module
to module while each leaves it clean: starting one costs 5-15 s on a loaded 2-core machine."""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

NUM_CPUS = 2  # the machines running CI have two cores
WIDE_NUM_CPUS = 4
"""For placements of 4 slots: the 2-core machines run the 4 workers oversubscribed."""
SETTLE_S = 10.0
"""How long a module's teardown waits for the actors it killed to give their CPUs back before it gives up on
sharing the runtime (the next module then starts a fresh one); it bounds a wait, it decides no verdict."""

logger = logging.getLogger(__name__)


class _SharedRay:
    """The Ray runtime these fixtures started (None while none runs) and its logical CPU count."""

    def __init__(self) -> None:
        self.num_cpus: int | None = None

    def start(self, num_cpus: int) -> None:
        import ray

        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        self.num_cpus = num_cpus

    def stop(self) -> None:
        import ray

        if self.num_cpus is not None:
            ray.shutdown()
            self.num_cpus = None


def _left_clean(timeout_s: float = SETTLE_S) -> bool:
    """Whether the running Ray runtime holds no live actor, no placement group and no busy CPU, as a fresh one;
    the actors a module killed take a moment to give their CPUs back, so this waits up to `timeout_s` for it."""
    import ray
    from ray._private import state

    gc.collect()  # an actor whose last handle sits in a reference cycle ends once the cycle is collected
    deadline = time.monotonic() + timeout_s
    while True:
        actors = [a for a in state.actors().values() if a["State"] != "DEAD"]
        groups = [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
        free = ray.available_resources().get("CPU", 0.0) == ray.cluster_resources().get("CPU", 0.0)
        counts = (len(actors), len(groups))
        if not actors and not groups and free:
            return True
        if time.monotonic() > deadline:
            logger.warning("not sharing the Ray runtime further: %d actors, %d placement groups live", *counts)
            return False
        time.sleep(0.1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules on the 4-CPU runtime (`wide_ray_runtime`) run last: a change of CPU count restarts the runtime,
    and the 2-CPU modules after them once cost a second restart."""
    wide = {getattr(item, "module", None) for item in items if "wide_ray_runtime" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: getattr(item, "module", None) in wide)  # stable: the order within each part stays


@pytest.fixture(scope="session")
def _shared_ray() -> Iterator[_SharedRay]:
    # Ray >= 2.5x enables token authentication by default and logs a warning about it; a local test cluster
    # needs none.
    previous = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    shared = _SharedRay()
    try:
        yield shared
    finally:
        shared.stop()
        if previous is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = previous


@contextmanager
def _local_ray(shared: _SharedRay, num_cpus: int) -> Iterator[None]:
    """A Ray runtime with `num_cpus` logical CPUs for the block: the session's, when the last module left it
    clean with as many CPUs, else a fresh one; or the one already running when another package's fixture started
    it in this pytest session and it has as many."""
    import ray

    if ray.is_initialized() and shared.num_cpus is None:
        if ray.cluster_resources().get("CPU", 0) < num_cpus:
            pytest.skip(f"a Ray runtime with fewer than {num_cpus} CPUs is already running in this session")
        yield
        return
    if shared.num_cpus != num_cpus or not ray.is_initialized():
        shared.stop()
        shared.start(num_cpus)
    try:
        yield
    finally:
        if not ray.is_initialized():
            shared.num_cpus = None  # a test shut it down
        elif not _left_clean():
            shared.stop()


@pytest.fixture(scope="module")
def ray_runtime(_shared_ray: _SharedRay) -> Iterator[None]:
    with _local_ray(_shared_ray, NUM_CPUS):
        yield


@pytest.fixture(scope="module")
def wide_ray_runtime(_shared_ray: _SharedRay) -> Iterator[None]:
    with _local_ray(_shared_ray, WIDE_NUM_CPUS):
        yield
