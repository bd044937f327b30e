"""The conformance run every `VectorEnv` implementation (real env or test double) should pass."""

from __future__ import annotations

import asyncio
from typing import cast

import torch

from rl_core.envs import VectorEnv, check_observation


def _values(tensor: torch.Tensor) -> list[int]:
    return cast("list[int]", tensor.tolist())  # pyright: ignore[reportUnknownMemberType]  # torch: bare `list`


async def _run(env: VectorEnv, chunk: int, seed: int) -> int:
    spec, n = env.spec, env.num_envs
    tasks = [i % len(spec.task_names) for i in range(n)]
    trials = [i % spec.num_trials for i in range(n)]
    obs = await env.reset(tasks, trials)
    check_observation(obs, spec, list(range(n)))
    if not bool(obs.active.all()) or bool(obs.finish_step.any()):
        raise AssertionError(f"reset must start running episodes at step 0, got active={_values(obs.active)}")
    gen = torch.Generator().manual_seed(seed)
    steps = torch.zeros(n, dtype=torch.int64)
    active = list(range(n))
    calls = 0
    while active:
        actions = torch.randint(0, spec.action_bins, (len(active), chunk, spec.action_dims), generator=gen)
        obs = await env.step(active, actions)
        check_observation(obs, spec, active)
        executed = obs.finish_step - steps[active]
        lengths = torch.tensor([v.shape[0] for v in obs.video])
        if not bool(((executed >= 0) & (executed <= chunk)).all()) or not torch.equal(lengths, executed):
            raise AssertionError(
                f"each env must execute 0..{chunk} steps per chunk and return one frame per executed step; "
                f"executed {_values(executed)}, video lengths {_values(lengths)}"
            )
        if bool((obs.active & (executed < chunk)).any()):
            raise AssertionError("a running episode must execute the whole chunk")
        steps[active] = obs.finish_step
        active = [i for i, on in zip(obs.indices, _values(obs.active), strict=True) if on]
        calls += 1
        if calls > spec.max_steps:
            raise AssertionError(f"episodes still running after {calls} chunks > max_steps={spec.max_steps}")
    return calls


def check_vector_env(env: VectorEnv, chunk: int = 3, seed: int = 0) -> int:
    """Reset every env, step random chunks until every episode ends, checking each answer against the contract.

    Raises `ShapeError`/`AssertionError` naming what is wrong; returns the number of step calls made.
    """
    return asyncio.run(_run(env, chunk, seed))
