"""One uninterrupted 4-step GRPO run (`STRAIGHT`) for the whole test session: test_e2e, test_run_folder and
test_datasets_e2e compare against it or copy its checkpoints, and each module once trained an identical one."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_runtime.trainer import Trainer, TrainResult

from ._runs import STRAIGHT
from ._task import TokenTask, tiny_config


class _OnceRun:
    """Trains STRAIGHT into `folder` at the first call (inside a test holding the Ray runtime), then returns it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.result: TrainResult | None = None

    def __call__(self) -> TrainResult:
        if self.result is None:
            self.result = Trainer(tiny_config(self.folder, **STRAIGHT), TokenTask).fit()
        return self.result


@pytest.fixture(scope="session")
def _straight_once(tmp_path_factory: pytest.TempPathFactory) -> _OnceRun:
    return _OnceRun(tmp_path_factory.mktemp("straight"))


@pytest.fixture(scope="module")
def straight(_straight_once: _OnceRun, ray_runtime: None) -> TrainResult:
    """The session's uninterrupted STRAIGHT run: 4 steps, a checkpoint after every one (the last 3 kept), a
    validation after the last. Read it, or copy its checkpoints; never write into its folder."""
    return _straight_once()
