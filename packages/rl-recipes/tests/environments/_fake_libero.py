"""Test double of LIBERO: a scripted suite and simulator speaking the interface the LIBERO adapter uses (the real
LIBERO never runs in CI). Shared by the adapter's tests and the OpenVLA-OFT Trainer test.

    env = libero_vector_env(config, fake_libero_api)  # or functools.partial(fake_libero_api, success_x=0.5)

Two tasks of `TRIALS` stored initial states each (a scalar "state" 10 t + k); the simulator moves x by action[0] and
succeeds once x >= `success_x`. Its image (before LIBERO's flip) encodes the trial in channel 0's top half, x as a
bar from the left in channel 1, and marks the top-left pixel of channel 2 (255), so a test can see the flip.
`FakeLiberoSim.built` and `.actions` record the simulators built and every action stepped (in this process).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rl_recipes.environments import LiberoApi

SUITE = "libero_fake"
"""The suite name `env.tasks` names."""
TRIALS = 5
"""Stored initial states per task."""


def task_language(t: int) -> str:
    """Task `t`'s instruction."""
    return f"put the bowl on the plate {t}"


class FakeLiberoTask:
    """A LIBERO task's fields the adapter reads."""

    def __init__(self, t: int) -> None:
        self.language = task_language(t)
        self.problem_folder, self.bddl_file = "fake_suite", f"task_{t}.bddl"


class FakeLiberoSuite:
    """A LIBERO benchmark suite of two tasks."""

    n_tasks = 2

    def get_task(self, t: int) -> FakeLiberoTask:
        return FakeLiberoTask(t)

    def get_task_init_states(self, t: int) -> list[float]:
        return [10.0 * t + k for k in range(TRIALS)]


class FakeLiberoSim:
    """Scripted stand-in for LIBERO's OffScreenRenderEnv (see the module doc)."""

    built: ClassVar[list[str]] = []
    actions: ClassVar[list[list[float]]] = []

    def __init__(self, bddl_file_name: str, camera_heights: int, camera_widths: int, success_x: float = 1.0) -> None:
        FakeLiberoSim.built.append(bddl_file_name)
        self._size, self._x, self._init, self._success_x = camera_heights, 0.0, 0.0, success_x

    def seed(self, seed: int) -> None:
        del seed

    def reset(self) -> Mapping[str, Any]:
        self._x = 0.0
        return self._obs()

    def set_init_state(self, state: float) -> Mapping[str, Any]:
        self._init, self._x = state, 0.0
        return self._obs()

    def step(self, action: list[float]) -> tuple[Mapping[str, Any], float, bool, dict[str, Any]]:
        assert len(action) == 7, action
        FakeLiberoSim.actions.append(list(action))
        self._x += action[0]
        done = self._x >= self._success_x
        return self._obs(), float(done), done, {}

    def close(self) -> None:
        pass

    def _obs(self) -> Mapping[str, Any]:
        image = np.zeros((self._size, self._size, 3), dtype=np.uint8)
        image[: self._size // 2, :, 0] = int(self._init) % 256
        image[:, : max(min(int(self._x * self._size), self._size), 0), 1] = 255
        image[0, 0, 2] = 255
        return {
            "agentview_image": image,
            "robot0_eef_pos": np.array([self._x, 0.0, 0.0]),
            "robot0_eef_quat": np.zeros(4),
            "robot0_gripper_qpos": np.zeros(2),
        }


def fake_libero_api(assets_dir: str, success_x: float = 1.0) -> LiberoApi:
    """A `LiberoApi` over the fake suite (`SUITE`) and simulator; `assets_dir` must exist, as LIBERO's must."""
    assert Path(assets_dir).is_dir(), assets_dir
    sim = functools.partial(FakeLiberoSim, success_x=success_x)
    return LiberoApi(lambda: {SUITE: FakeLiberoSuite}, lambda key: f"/fake/{key}", sim)
