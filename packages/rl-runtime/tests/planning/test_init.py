"""The public names of rl_runtime.planning are pinned."""

from __future__ import annotations

import rl_runtime.planning as planning

PUBLIC = [
    "APPORTION_STRATEGIES", "ApportionStrategy", "InsufficientSlotsError", "Placement", "PlanningError",
    "SchedulerConfig", "TaskScheduler", "WorkerAssignment", "register_apportion_strategy",
]  # fmt: skip


def test_public_api_is_pinned() -> None:
    assert sorted(planning.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(planning, name), name
