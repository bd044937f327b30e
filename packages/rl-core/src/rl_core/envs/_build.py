"""Pick the in-process env or the worker pool for a config: the last step of every env factory."""

from __future__ import annotations

from rl_core.envs._episode import EpisodeEnvFactory
from rl_core.envs._local import LocalVectorEnv
from rl_core.envs._pool import EnvPool
from rl_core.envs._protocols import VectorEnv
from rl_core.envs._types import EnvConfig, EnvSpec


def vector_env(config: EnvConfig, spec: EnvSpec, factory: EpisodeEnvFactory) -> VectorEnv:
    """`LocalVectorEnv` when `config.num_workers` is 0, else an `EnvPool` of that many workers (at most num_envs)."""
    if config.num_workers == 0:
        return LocalVectorEnv(spec, factory, config.num_envs)
    workers = min(config.num_workers, config.num_envs)
    return EnvPool(spec, factory, config.num_envs, workers, step_timeout_s=config.step_timeout_s)
