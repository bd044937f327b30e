"""`EnvPool` answers like `LocalVectorEnv`, and survives killed, crashing and hung workers."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import time

import pytest
import torch

from rl_core.envs import EnvConfig, EnvConfigError, EnvObservation, EnvPool, LocalVectorEnv, VectorEnv
from rl_core.testing import TOY_TASKS, ToyEpisodeEnv, check_vector_env, make_toy_env, toy_spec

SPEC = toy_spec(max_steps=6)


def _assert_same(a: EnvObservation, b: EnvObservation) -> None:
    assert a.indices == b.indices
    assert a.instructions == b.instructions
    for name in ("frames", "active", "complete", "finish_step", "failed", "state"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert len(a.video) == len(b.video)
    assert all(torch.equal(x, y) for x, y in zip(a.video, b.video, strict=True))


async def _episode(env: VectorEnv, seed: int) -> list[EnvObservation]:
    gen = torch.Generator().manual_seed(seed)
    answers = [await env.reset([0, 1, 1, 0, 1], [0, 1, 2, 3, 4])]
    for _ in range(4):
        active = [i for i, a in zip(answers[-1].indices, answers[-1].active.tolist(), strict=True) if a]
        if not active:
            break
        actions = torch.randint(0, 3, (len(active), 2, 1), generator=gen)
        answers.append(await env.step(active, actions))
    return answers


async def _two_steps(env: VectorEnv, cancel_first: bool) -> EnvObservation:
    """Reset and step twice; with `cancel_first` the first step is cancelled while it waits for the envs."""
    await env.reset([1, 1, 1, 1, 1], [0, 1, 2, 3, 4])
    first = asyncio.ensure_future(env.step([0, 1, 2, 3, 4], torch.ones((5, 1, 1), dtype=torch.int64)))
    if cancel_first:
        await asyncio.sleep(0)  # the step is sent and waits for the answers
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
    else:
        await first
    return await env.step([0, 1, 2, 3, 4], torch.ones((5, 2, 1), dtype=torch.int64))


def test_pool_answers_equal_the_local_env() -> None:
    local = LocalVectorEnv(SPEC, ToyEpisodeEnv, num_envs=5)
    pool = EnvPool(SPEC, ToyEpisodeEnv, num_envs=5, num_workers=2, step_timeout_s=20)
    # 768 bytes hold a reset answer of 3 toy envs (frames, 1-frame videos, states: 704 bytes aligned) but not
    # their answer to 2-action chunks (960): this pool's answers travel both through the buffer and the pipe
    small = EnvPool(SPEC, ToyEpisodeEnv, num_envs=5, num_workers=2, step_timeout_s=20, shared_bytes=768)
    try:
        for seed in (0, 1):
            expected = asyncio.run(_episode(local, seed))
            for env in (pool, small):
                got = asyncio.run(_episode(env, seed))
                assert len(expected) == len(got) > 1
                for a, b in zip(expected, got, strict=True):
                    _assert_same(a, b)
        first = expected[0]
        assert first.frames.shape == (5, *SPEC.image_shape) and first.frames.dtype == torch.uint8
        assert [v.shape[0] for v in first.video] == [1] * 5
        assert first.state is not None and first.state.shape == (5, 2)
        assert isinstance(pool, VectorEnv) and isinstance(local, VectorEnv)
        assert check_vector_env(local) == check_vector_env(pool) > 0
        # a cancelled pool call still runs to its end (its answers are read off the pipes): the next call is in step
        expected = asyncio.run(_two_steps(local, cancel_first=False))
        assert expected.finish_step.tolist() == [3] * 5
        _assert_same(expected, asyncio.run(_two_steps(pool, cancel_first=True)))
    finally:
        local.close()
        pool.close()
        small.close()


def test_the_toy_env_factory_builds_from_a_config_and_refuses_other_tasks_and_options() -> None:
    env = make_toy_env(EnvConfig(name="toy", num_envs=3, max_steps=5, num_trials=4))
    try:
        assert isinstance(env, LocalVectorEnv) and env.spec == toy_spec(max_steps=5, num_trials=4)
        assert env.spec.task_names == TOY_TASKS and check_vector_env(env) > 0
    finally:
        env.close()
    with pytest.raises(EnvConfigError, match=r"env.tasks: the toy env has exactly the tasks"):
        make_toy_env(EnvConfig(name="toy", tasks=("reach the left end",)))
    with pytest.raises(EnvConfigError, match=r"env.options: the toy env takes none, got \['size'\]"):
        make_toy_env(EnvConfig(name="toy", options={"size": 4}))


def test_chunk_stops_at_success_and_counts_executed_steps() -> None:
    env = LocalVectorEnv(SPEC, ToyEpisodeEnv, num_envs=2)
    asyncio.run(env.reset([0, 1], [0, 0]))  # both start at cell 1; task 0's goal is one step left
    obs = asyncio.run(env.step([0, 1], torch.tensor([[[0], [0], [0]], [[2], [2], [2]]])))
    assert obs.complete.tolist() == [True, False]
    assert obs.active.tolist() == [False, True]
    assert obs.finish_step.tolist() == [1, 3]
    assert [v.shape[0] for v in obs.video] == [1, 3]
    again = asyncio.run(env.step([0, 1], torch.tensor([[[2]], [[1]]])))
    assert again.finish_step.tolist() == [1, 4]
    assert again.video[0].shape[0] == 0  # an ended episode ignores its chunk
    env.close()


def test_truncation_at_max_steps() -> None:
    env = LocalVectorEnv(SPEC, ToyEpisodeEnv, num_envs=1)
    asyncio.run(env.reset([1], [0]))
    obs = asyncio.run(env.step([0], torch.ones((1, 10, 1), dtype=torch.int64)))  # stay for 10 > max_steps
    assert obs.active.tolist() == [False] and obs.complete.tolist() == [False]
    assert obs.finish_step.tolist() == [SPEC.max_steps]
    env.close()


def test_sigkilled_worker_is_replaced_and_counted() -> None:
    pool = EnvPool(SPEC, ToyEpisodeEnv, num_envs=4, num_workers=2, step_timeout_s=20)
    try:
        asyncio.run(pool.reset([1, 1, 1, 1], [0, 1, 2, 3]))
        stay = torch.ones((4, 1, 1), dtype=torch.int64)
        asyncio.run(pool.step([0, 1, 2, 3], stay))
        os.kill(pool.worker_pids[1], signal.SIGKILL)
        time.sleep(1.0)  # dead before the next call: the pool finds a closed pipe rather than a silent worker
        obs = asyncio.run(pool.step([0, 1, 2, 3], stay))
        assert obs.failed.tolist() == [False, False, True, True]
        assert obs.active.tolist() == [True, True, False, False]
        assert obs.finish_step.tolist() == [2, 2, 1, 1]
        assert pool.worker_failures == 1 and pool.failed_episodes == 2
        # the replacement serves the next reset like the original did
        fresh = asyncio.run(pool.reset([1, 1, 1, 1], [0, 1, 2, 3]))
        assert not fresh.failed.any() and fresh.active.all()
        assert asyncio.run(pool.step([2, 3], stay[:2])).finish_step.tolist() == [1, 1]
    finally:
        pool.close()


def test_hung_worker_times_out_and_crashing_worker_fails_only_its_episodes() -> None:
    for misbehave in ("hang", "exit"):
        factory = functools.partial(ToyEpisodeEnv, misbehave_task=0, misbehave=misbehave)
        pool = EnvPool(SPEC, factory, num_envs=4, num_workers=2, step_timeout_s=3)
        try:
            asyncio.run(pool.reset([1, 1, 0, 1], [0, 1, 2, 3]))  # slot 2 (worker 1) misbehaves when stepped
            start = time.monotonic()
            obs = asyncio.run(pool.step([0, 1, 2], torch.ones((3, 2, 1), dtype=torch.int64)))
            assert time.monotonic() - start < 15
            assert obs.failed.tolist() == [False, False, True]
            assert obs.finish_step.tolist() == [2, 2, 0]
            assert pool.worker_failures == 1
            assert pool.failed_episodes == 2  # slot 2, and slot 3 lost with its worker
            lost = asyncio.run(pool.step([3], torch.ones((1, 1, 1), dtype=torch.int64)))
            assert lost.failed.tolist() == [True] and lost.active.tolist() == [False]
            assert pool.worker_failures == 1
        finally:
            pool.close()


def test_bad_pool_size_is_refused() -> None:
    with pytest.raises(ValueError, match="num_workers"):
        EnvPool(SPEC, ToyEpisodeEnv, num_envs=2, num_workers=3)
