"""Embodied environments registered with `rl_core.envs`: BabyAI (minigrid, the CPU default) and LIBERO (extra).

Importing this package registers "babyai" and "libero" in `rl_core.envs.ENVIRONMENTS`; build them with
`rl_core.envs.make_env(EnvConfig(name=...))`. It also imports `rl_engines.embedders`, so every video embedder
("pixel_pyramid", "privileged_state", "vjepa2") is registered once this package is imported.
"""

import rl_engines.embedders  # noqa: F401 - registers the "vjepa2" video embedder
from rl_recipes.environments._babyai import (
    DEFAULT_LEVELS,
    STATE_DIM,
    BabyAIEpisodeEnv,
    babyai_factory,
    babyai_spec,
    make_babyai,
    trial_seed,
)
from rl_recipes.environments._demos import Demonstration, babyai_demos
from rl_recipes.environments._libero import (
    LiberoApi,
    LiberoEpisodeEnv,
    decode_bins,
    libero_options,
    libero_spec,
    libero_vector_env,
    load_libero_api,
    make_libero,
    write_libero_config,
)

__all__ = [
    "DEFAULT_LEVELS",
    "STATE_DIM",
    "BabyAIEpisodeEnv",
    "Demonstration",
    "LiberoApi",
    "LiberoEpisodeEnv",
    "babyai_demos",
    "babyai_factory",
    "babyai_spec",
    "decode_bins",
    "libero_options",
    "libero_spec",
    "libero_vector_env",
    "load_libero_api",
    "make_babyai",
    "make_libero",
    "trial_seed",
    "write_libero_config",
]
