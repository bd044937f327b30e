"""The LIBERO adapter against a scripted fake that speaks LIBERO's interface (`_fake_libero`: the real one never
runs in CI)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import torch
from _fake_libero import SUITE, TRIALS, FakeLiberoSim, fake_libero_api, task_language

from rl_core.envs import EnvConfig, EnvConfigError, LocalVectorEnv, make_env
from rl_core.testing import check_vector_env
from rl_recipes.environments import decode_bins, libero_vector_env, write_libero_config


def _config(tmp_path: Path, **options: Any) -> EnvConfig:
    return EnvConfig(
        name="libero",
        tasks=(SUITE,),
        num_envs=2,
        max_steps=6,
        num_trials=TRIALS,
        options={"assets_dir": str(tmp_path), "image_size": 8, "num_steps_wait": 2, **options},
    )


def test_adapter_runs_episodes_on_the_fake(tmp_path: Path) -> None:
    FakeLiberoSim.built.clear()
    FakeLiberoSim.actions.clear()
    env = libero_vector_env(_config(tmp_path), fake_libero_api)
    try:
        assert isinstance(env, LocalVectorEnv)
        assert env.spec.image_shape == (3, 8, 8) and (env.spec.action_dims, env.spec.action_bins) == (7, 256)
        assert env.spec.task_names == (task_language(0), task_language(1))
        obs = asyncio.run(env.reset([1, 0], [3, 4]))
        assert obs.instructions == env.spec.task_names[::-1]
        assert int(obs.frames[0, 0, -1, -1]) == 13  # trial 3 of task 1, flipped like LIBERO's renders
        assert (int(obs.frames[0, 2, -1, -1]), int(obs.frames[0, 2, 0, 0])) == (255, 0)  # both axes flipped
        assert obs.state is not None and obs.state.shape == (2, 9)
        assert len(FakeLiberoSim.actions) == 4  # 2 settle steps per env, with the gripper open
        assert all(a == [0.0] * 6 + [-1.0] for a in FakeLiberoSim.actions)
        fast, slow = 255, 160  # bins for x += 0.996 (bin 255 decodes as 254) and x += 0.26
        chunk = torch.full((2, 3, 7), 127)
        chunk[0, :, 0], chunk[1, :, 0] = fast, slow
        obs = asyncio.run(env.step([0, 1], chunk))
        assert obs.complete.tolist() == [True, False]
        assert obs.finish_step.tolist() == [2, 3]  # x reaches 1 on the second step; the rest is ignored
        assert obs.active.tolist() == [False, True]
        asyncio.run(env.reset([1, 1], [0, 1]))
        # one simulator per (env, task), reused across resets: env 0 keeps task 1's, env 1 adds task 1's
        assert sorted(FakeLiberoSim.built) == [f"/fake/bddl_files/fake_suite/task_{t}.bddl" for t in (0, 1, 1)]
        assert check_vector_env(env, chunk=2) > 0
    finally:
        env.close()


def test_decode_bins_follows_openvla_and_siirl() -> None:
    action = decode_bins([0, 255, 254, 127, 128, 0, 255], 256, [-1.0] * 6 + [0.0], [1.0] * 7)
    centres = (torch.linspace(-1, 1, 256)[:-1] + torch.linspace(-1, 1, 256)[1:]) / 2
    assert action[0] == pytest.approx(float(centres[0]))
    assert action[1] == pytest.approx(float(centres[254]))  # bin 255 clips to the last centre, as OpenVLA's decode
    assert action[2] == action[1]
    assert action[6] == -1.0  # gripper 1 (close in [0, 1]) -> +1 -> inverted
    closed = decode_bins([0] * 7, 256, [-1.0] * 6 + [0.0], [1.0] * 7)
    assert closed[6] == 1.0
    unnorm = decode_bins([255] + [0] * 6, 256, [0.0] * 7, [10.0] * 7)
    assert unnorm[0] == pytest.approx(5.0 * (float(centres[254]) + 1.0))


def test_missing_assets_and_bad_config_are_refused(tmp_path: Path) -> None:
    with pytest.raises(EnvConfigError, match=r"env\.options\.assets_dir: LIBERO needs its assets folder"):
        make_env(EnvConfig(name="libero", tasks=("libero_goal",), num_workers=2))
    with pytest.raises(EnvConfigError, match=r"env\.options\.assets_dir: '.*nope' is not a folder.*set env"):
        make_env(_config(tmp_path, assets_dir=str(tmp_path / "nope")))
    with pytest.raises(EnvConfigError, match=r"env\.tasks: LIBERO takes exactly one suite.*libero_fake"):
        libero_vector_env(
            EnvConfig(name="libero", tasks=("libero_10",), options={"assets_dir": str(tmp_path)}), fake_libero_api
        )
    with pytest.raises(EnvConfigError, match=r"env\.num_trials: libero_fake stores 5"):
        libero_vector_env(
            EnvConfig(name="libero", tasks=("libero_fake",), num_trials=6, options={"assets_dir": str(tmp_path)}),
            fake_libero_api,
        )
    with pytest.raises(EnvConfigError, match=r"env\.options\.action_low: expected 7 numbers"):
        libero_vector_env(_config(tmp_path, action_low=[0.0]), fake_libero_api)


def test_missing_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EnvConfigError, match=r"pip install 'rl-recipes\[libero\]'"):
        write_libero_config(str(tmp_path))
