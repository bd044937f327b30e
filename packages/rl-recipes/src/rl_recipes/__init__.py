"""rl-recipes: turnkey GRPO / Dr. GRPO / RLOO / REINFORCE++ / ReMax / PPO / DAPO recipes and the CLI."""

from rl_recipes._errors import RecipeError

__version__ = "0.1.0"

__all__ = ["RecipeError", "__version__"]
