"""BabyAI through the env seam: spec, determinism per (task, trial), pool parity, bad config, bot demos."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest
import torch

from rl_core.envs import EnvConfig, EnvConfigError, EnvPool, LocalVectorEnv, make_env
from rl_core.testing import check_vector_env
from rl_recipes.environments import STATE_DIM, babyai_demos, babyai_factory, babyai_spec

BASE = EnvConfig(name="babyai", num_envs=4, max_steps=32, num_trials=8)


def _config(**changes: Any) -> EnvConfig:
    return dataclasses.replace(BASE, **changes)


def test_spec_and_first_observation() -> None:
    env = make_env(_config(tasks=("GoToLocal", "GoToRedBallGrey")))
    try:
        assert isinstance(env, LocalVectorEnv)
        assert env.spec.image_shape == (3, 56, 56)
        assert (env.spec.action_dims, env.spec.action_bins) == (1, 3)
        assert env.spec.task_names == ("GoToLocal", "GoToRedBallGrey")
        obs = asyncio.run(env.reset([0, 1], [0, 0]))
        assert obs.frames.shape == (2, 3, 56, 56) and obs.frames.dtype == torch.uint8
        assert obs.instructions[1] == "go to the red ball"
        assert obs.instructions[0].startswith("go to ")
        assert obs.state is not None and obs.state.shape == (2, STATE_DIM)
        assert obs.active.all() and not obs.complete.any()
        assert check_vector_env(env, chunk=4) > 0
    finally:
        env.close()


def test_reset_is_deterministic_per_task_and_trial() -> None:
    a, b = make_env(_config()), make_env(_config())
    try:
        first = asyncio.run(a.reset([0, 0, 0], [0, 1, 2]))
        again = asyncio.run(b.reset([0, 0, 0], [0, 1, 2]))
        assert torch.equal(first.frames, again.frames)
        assert first.instructions == again.instructions
        shifted = asyncio.run(b.reset([0, 0, 0], [1, 2, 3]))
        assert torch.equal(shifted.frames[0], first.frames[1])  # trial 1 is trial 1 in any slot
        other = asyncio.run(b.reset([0], [0]))
        assert torch.equal(other.frames[0], first.frames[0])
        held_out = make_env(_config(options={"trial_offset": 100}))
        try:
            fresh = asyncio.run(held_out.reset([0, 0, 0], [0, 1, 2]))
            assert not torch.equal(fresh.frames, first.frames)
        finally:
            held_out.close()
    finally:
        a.close()
        b.close()


def test_rejected_level_layouts_go_to_the_debug_log_not_the_console(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # minigrid prints "Sampling rejected: ..." while generating these trials' GoToLocal layouts (seed 0).
    env = make_env(_config(num_trials=64))
    try:
        with caplog.at_level(logging.DEBUG, logger="rl_recipes.environments._babyai"):
            asyncio.run(env.reset([0, 0, 0, 0], [8, 48, 57, 60]))
    finally:
        env.close()
    assert capsys.readouterr().out == ""
    assert any("Sampling rejected" in record.getMessage() for record in caplog.records)


def test_pool_matches_local_env() -> None:
    config = _config()
    local = make_env(config)
    pool = EnvPool(babyai_spec(config), babyai_factory(config), num_envs=4, num_workers=2, step_timeout_s=60)
    try:
        gen = torch.Generator().manual_seed(0)
        expected, got = asyncio.run(local.reset([0] * 4, [0, 1, 2, 3])), asyncio.run(pool.reset([0] * 4, [0, 1, 2, 3]))
        assert torch.equal(expected.frames, got.frames)
        for _ in range(3):
            actions = torch.randint(0, 3, (4, 4, 1), generator=gen)
            expected, got = asyncio.run(local.step(range(4), actions)), asyncio.run(pool.step(range(4), actions))
            for name in ("frames", "active", "complete", "finish_step", "state"):
                assert torch.equal(getattr(expected, name), getattr(got, name)), name
            assert all(torch.equal(x, y) for x, y in zip(expected.video, got.video, strict=True))
    finally:
        local.close()
        pool.close()


def test_bad_config_is_refused_before_any_worker() -> None:
    with pytest.raises(EnvConfigError, match=r"env\.tasks: unknown BabyAI level 'GoToLocl' \(did you mean 'GoToLocal'"):
        make_env(_config(tasks=("GoToLocl",), num_workers=2))
    with pytest.raises(EnvConfigError, match=r"env\.options: unknown BabyAI option\(s\) \['size'\]"):
        make_env(_config(options={"size": 3}))
    with pytest.raises(EnvConfigError, match=r"env\.options\.num_actions"):
        make_env(_config(options={"num_actions": 9}))
    env = make_env(_config())
    try:
        with pytest.raises(EnvConfigError, match=r"trial_id 8 out of range"):
            asyncio.run(env.reset([0], [8]))
        with pytest.raises(EnvConfigError, match=r"task_id 1 out of range"):
            asyncio.run(env.reset([1], [0]))
    finally:
        env.close()


def test_bot_demos_succeed_and_replay() -> None:
    config = _config()
    demos = babyai_demos(config, [0] * 6, list(range(6)))
    assert len(demos) >= 5
    env = make_env(config)
    try:
        for demo in demos:
            assert demo.frames.shape == (demo.actions.shape[0], 3, 56, 56)
            assert demo.actions.dtype == torch.int64 and int(demo.actions.max()) < 3
            obs = asyncio.run(env.reset([demo.task_id], [demo.trial_id]))
            assert obs.instructions[0] == demo.instruction
            assert torch.equal(obs.frames[0], demo.frames[0])
            done = asyncio.run(env.step([0], demo.actions.unsqueeze(0)))
            assert done.complete.tolist() == [True]
            assert done.finish_step.tolist() == [demo.actions.shape[0]]
    finally:
        env.close()
