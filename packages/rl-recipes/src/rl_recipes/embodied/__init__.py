"""Embodied RL pieces of the SRPO recipe: the instruction task, the tiny VLA's warm start on bot demonstrations,
the recipe's config, and its figures (success curve, frame strip)."""

from rl_recipes.embodied._config import SRPORecipeConfig, VLAWarmStartConfig
from rl_recipes.embodied._report import draw_frame_strip, play_episodes, plot_success_curve, read_metrics
from rl_recipes.embodied._task import EmbodiedTask, EmbodiedTaskFactory
from rl_recipes.embodied._warm_start import chunk_examples, probe_env, vla_config, warm_start

__all__ = [
    "EmbodiedTask",
    "EmbodiedTaskFactory",
    "SRPORecipeConfig",
    "VLAWarmStartConfig",
    "chunk_examples",
    "draw_frame_strip",
    "play_episodes",
    "plot_success_curve",
    "probe_env",
    "read_metrics",
    "vla_config",
    "warm_start",
]
