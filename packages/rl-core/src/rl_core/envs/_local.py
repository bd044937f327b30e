"""`LocalVectorEnv`: the contract's `VectorEnv` over N envs in this process (tests, and the benchmark baseline)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import cast

import torch

from rl_core.envs._episode import EpisodeEnvFactory, EpisodeRunner, SlotAnswer, assemble
from rl_core.envs._registry import check_reset_args, check_step_args
from rl_core.envs._types import EnvError, EnvObservation, EnvSpec


class LocalVectorEnv:
    """N `EpisodeEnv`s stepped one after the other in this process; the blocking loop runs in a thread.

    Same answers as `EnvPool` for the same seeds and actions, without subprocesses; `failed` is always False.
    """

    worker_failures: int = 0
    """Always 0 (no workers); present so callers can report it for either kind of env."""

    def __init__(self, spec: EnvSpec, factory: EpisodeEnvFactory, num_envs: int) -> None:
        self._spec = spec
        self._runners = [EpisodeRunner(factory(), spec) for _ in range(num_envs)]
        self._closed = False
        self._lock = threading.Lock()  # calls run in threads; one at a time

    @property
    def spec(self) -> EnvSpec:
        """The env's `EnvSpec`."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Number of env slots."""
        return len(self._runners)

    async def reset(self, task_ids: Sequence[int], trial_ids: Sequence[int]) -> EnvObservation:
        """Reset envs 0..len(task_ids)-1 to the given (task, trial) initial states."""
        self._check_open()
        check_reset_args(self._spec, self.num_envs, task_ids, trial_ids)
        pairs = list(zip(task_ids, trial_ids, strict=True))

        def run_resets() -> list[SlotAnswer]:
            with self._lock:
                return [self._runners[i].reset(t, k) for i, (t, k) in enumerate(pairs)]

        answers = await asyncio.to_thread(run_resets)
        return assemble(range(len(pairs)), answers, [False] * len(pairs))

    async def step(self, indices: Sequence[int], actions: torch.Tensor) -> EnvObservation:
        """Run one chunk `actions` (N, K, D) int64 on the envs at `indices`."""
        self._check_open()
        check_step_args(self._spec, self.num_envs, indices, actions)
        chunks = cast("list[list[list[int]]]", actions.tolist())  # pyright: ignore[reportUnknownMemberType]  # torch: bare `list`

        def run() -> list[SlotAnswer]:
            with self._lock:
                return [self._runners[i].step(chunk) for i, chunk in zip(indices, chunks, strict=True)]

        answers = await asyncio.to_thread(run)
        return assemble(indices, answers, [False] * len(indices))

    def close(self) -> None:
        """Close every env (idempotent)."""
        if not self._closed:
            self._closed = True
            for runner in self._runners:
                runner.env.close()

    def _check_open(self) -> None:
        if self._closed:
            raise EnvError(f"{self._spec.name!r} env is closed; build a new one with make_env")
