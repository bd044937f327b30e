"""Embodied environments registered with `rl_core.envs`: BabyAI (minigrid, the CPU default) and LIBERO (extra).

Importing this package registers "babyai" and "libero" in `rl_core.envs.ENVIRONMENTS`; build them with
`rl_core.envs.make_env(EnvConfig(name=...))`.
"""

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

__all__ = [
    "DEFAULT_LEVELS",
    "STATE_DIM",
    "BabyAIEpisodeEnv",
    "Demonstration",
    "babyai_demos",
    "babyai_factory",
    "babyai_spec",
    "make_babyai",
    "trial_seed",
]
