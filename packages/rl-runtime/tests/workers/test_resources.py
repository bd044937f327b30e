"""What a resources factory returns (no Ray): typed resources for the operations, hooks checked when built."""

from __future__ import annotations

import pytest

from rl_runtime.workers import WorkerHooks, WorkerResources
from rl_runtime.workers._errors import WorkerStartError
from rl_runtime.workers._resources import unpack_resources

from ._fakes import FakeResources


class _Hooks:
    def save_checkpoint(self, path: str) -> None: ...

    def load_checkpoint(self, path: str) -> None: ...

    def evaluate(self, step: int) -> dict[str, float]:
        return {}

    def close(self) -> None: ...


def test_resources_carry_the_operations_object_and_the_hooks() -> None:
    hooks = _Hooks()
    built = unpack_resources(WorkerResources(FakeResources(scale=2.0), hooks), rank=0)
    assert built.nodes.scale == 2.0 and built.hooks is hooks and isinstance(hooks, WorkerHooks)
    assert WorkerResources(None).hooks is None


def test_a_factory_returning_a_mapping_is_told_to_return_worker_resources() -> None:
    with pytest.raises(WorkerStartError, match=r"factory of worker rank 3 returned a dict; return a .*WorkerResources"):
        unpack_resources({"run": FakeResources(scale=1.0)}, rank=3)


def test_hooks_must_implement_worker_hooks() -> None:
    with pytest.raises(WorkerStartError, match=r"WorkerResources\.hooks must implement .*WorkerHooks.*got a str"):
        WorkerResources(None, hooks="checkpoints")
