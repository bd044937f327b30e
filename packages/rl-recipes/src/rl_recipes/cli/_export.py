"""`rl-recipes export`: a training checkpoint's actor as a Hugging Face folder (no separate merger tool): a language
model with its tokenizer for the text recipes, the VLA with its word tokenizer for SRPO runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from rl_recipes._errors import RecipeError
from rl_recipes.embodied import SRPORecipeConfig
from rl_recipes.recipes import RecipeConfig, srpo
from rl_recipes.recipes._run import CONFIG_FILE
from rl_recipes.sft import export_model_folder
from rl_recipes.tasks import load_tokenizer
from rl_runtime.config import load_config
from rl_runtime.trainer import build_actor, verify_checkpoint

ACTOR_DIR = "actor"
_RUN_DIR_DEPTH = 2
"""A checkpoint lives at <run>/checkpoints/step_N, so the run folder (with config.yaml) is two levels up."""


def export_checkpoint(checkpoint: Path, out: Path) -> Path:
    """Load the actor of `checkpoint` (any world size; its manifest verified first) in this process and write `out`
    with its tokenizer (for an `embodied_srpo` run: the VLA folder `VLAPolicy.from_pretrained` loads)."""
    state = verify_checkpoint(checkpoint)
    config_file = checkpoint.parents[_RUN_DIR_DEPTH - 1] / CONFIG_FILE
    if not config_file.is_file():
        raise RecipeError(
            f"{config_file} not found: export reads the run's config next to its checkpoints folder; pass a "
            "checkpoint written by `rl-recipes train`"
        )
    total_steps = int(state.get("total_steps", state["step"]))
    raw = yaml.safe_load(config_file.read_text()) or {}
    if raw.get("pipeline") == srpo.PIPELINE:
        return srpo.export_policy(load_config(SRPORecipeConfig, config_file), checkpoint, total_steps, out)
    config = load_config(RecipeConfig, config_file)
    actor = build_actor(config, total_steps=total_steps)
    actor.load_checkpoint(checkpoint / ACTOR_DIR)
    if config.tokenizer_path is None:
        raise RecipeError(f"{config_file}: actor.model has no tokenizer_path or path; export needs the tokenizer")
    tokenizer = load_tokenizer(config.tokenizer_path)
    return export_model_folder(actor, tokenizer, out)
