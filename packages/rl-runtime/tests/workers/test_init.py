"""The public names of rl_runtime.workers are pinned."""

from __future__ import annotations

import rl_runtime.workers as workers

PUBLIC = [
    "NODE_OPERATIONS", "NODE_TIMING_PREFIX", "Driver", "LocalWorker", "NodeContext", "NodeExecutionError",
    "NodeOperation", "RankFailedError", "ResourcesFactory", "SPMDDriver", "StepData", "StepDataError", "StepResult",
    "WorkerError", "WorkerHooks", "WorkerLostError", "WorkerResources", "bind_operations", "plan_routes",
    "register_operation", "run_steps", "start_workers",
]  # fmt: skip


def test_public_api_is_pinned() -> None:
    assert sorted(workers.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(workers, name), name
