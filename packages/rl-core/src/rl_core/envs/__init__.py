"""The environment seam for embodied RL: batched async `VectorEnv`s, `VideoEmbedder`s and their registries.

Types only plus torch-only helpers, so other frameworks can implement the seam: rl-recipes registers concrete envs
(BabyAI, LIBERO), rl-engines learned embedders.
"""

from rl_core.envs._build import vector_env
from rl_core.envs._checks import check_observation
from rl_core.envs._embedders import PixelPyramidEmbedder, PrivilegedStateEmbedder, sample_frame_indices
from rl_core.envs._episode import EnvTick, EpisodeEnv, EpisodeEnvFactory
from rl_core.envs._local import LocalVectorEnv
from rl_core.envs._pool import EnvPool
from rl_core.envs._protocols import (
    FRAMES_INPUT,
    STATE_INPUT,
    VectorEnv,
    VideoEmbedder,
    embedder_input_kind,
)
from rl_core.envs._registry import (
    ENVIRONMENTS,
    VIDEO_EMBEDDERS,
    EnvFactory,
    VideoEmbedderFactory,
    check_env_config,
    check_reset_args,
    check_step_args,
    make_env,
    make_video_embedder,
    register_environment,
    register_video_embedder,
)
from rl_core.envs._types import EmbedderConfig, EnvConfig, EnvConfigError, EnvError, EnvObservation, EnvSpec

__all__ = [
    "ENVIRONMENTS",
    "FRAMES_INPUT",
    "STATE_INPUT",
    "VIDEO_EMBEDDERS",
    "EmbedderConfig",
    "EnvConfig",
    "EnvConfigError",
    "EnvError",
    "EnvFactory",
    "EnvObservation",
    "EnvPool",
    "EnvSpec",
    "EnvTick",
    "EpisodeEnv",
    "EpisodeEnvFactory",
    "LocalVectorEnv",
    "PixelPyramidEmbedder",
    "PrivilegedStateEmbedder",
    "VectorEnv",
    "VideoEmbedder",
    "VideoEmbedderFactory",
    "check_env_config",
    "check_observation",
    "check_reset_args",
    "check_step_args",
    "embedder_input_kind",
    "make_env",
    "make_video_embedder",
    "register_environment",
    "register_video_embedder",
    "sample_frame_indices",
    "vector_env",
]
