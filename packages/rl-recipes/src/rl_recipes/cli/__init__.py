"""The `rl-recipes` command line: train, sft, eval, export, list.

rl-recipes train grpo                               # the embedded default, a few minutes on a laptop CPU
rl-recipes train ppo --config ppo.yaml actor.optimizer.lr=1e-6 trainer.total_steps=200
rl-recipes train grpo --help                        # every config field with its default and meaning
"""

from rl_recipes.cli._main import build_parser, main
from rl_recipes.cli._reference import config_reference

__all__ = ["build_parser", "config_reference", "main"]
