"""What each `rl-recipes` subcommand does, given its parsed arguments; returns the process exit code."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rl_core import load_plugins
from rl_core.advantages import ADVANTAGE_ESTIMATORS
from rl_core.envs import EnvConfig
from rl_core.graph import PIPELINES, get_pipeline
from rl_core.losses import POLICY_LOSSES
from rl_recipes._errors import RecipeError
from rl_recipes.cli._logs import attach_run_log
from rl_recipes.evaluation import evaluate_math, evaluate_policy
from rl_recipes.recipes import RECIPES, config_path, get_recipe, load_recipe_config, run_recipe
from rl_recipes.recipes import sft as sft_recipe
from rl_recipes.rewards import REWARD_FUNCTIONS
from rl_recipes.rm import RMConfig, run_rm
from rl_recipes.sft import SFTConfig
from rl_recipes.tasks import load_math_dataset, load_tokenizer
from rl_runtime.config import load_config
from rl_runtime.trainer import launch_from_env

logger = logging.getLogger(__name__)

TAKE_OVER_OVERRIDE = "trainer.take_over=true"


def train(args: argparse.Namespace) -> int:
    """Run a recipe; print the held-out reward before and after and where the run folder is."""
    recipe = get_recipe(args.recipe)
    overrides = [*args.overrides, *([TAKE_OVER_OVERRIDE] if args.take_over else [])]
    config = load_recipe_config(recipe.name, args.config, overrides)
    launch = launch_from_env()  # under torchrun every rank runs this command; rank 0 reports
    args.log_file = attach_run_log(Path(config.trainer.output_dir), launch.rank)
    logger.info("rl-recipes train %s: log file %s", recipe.name, args.log_file)
    result = run_recipe(recipe, config)
    if not launch.is_leader:
        return 0
    before, after = result.heldout_before, result.heldout_after
    lines = [f"recipe {recipe.name}: {result.train.end_step} steps, run folder {result.run_dir}"]
    if before is not None and after is not None:
        lines.append(f"held-out reward: {before:.3f} before -> {after:.3f} after ({after - before:+.3f})")
    if result.curve is not None:
        lines.append(f"reward curve: {result.curve}")
    print("\n".join(lines))  # noqa: T201 - the command's report to its user
    return 0


def sft(args: argparse.Namespace) -> int:
    """Run the supervised warm start and print its held-out exact match."""
    config = load_config(SFTConfig, args.config or config_path(sft_recipe.CONFIG_FILE), args.overrides)
    result = sft_recipe.run(config)
    accuracy = "n/a" if result.heldout_exact_match is None else f"{result.heldout_exact_match:.3f}"
    print(f"SFT: {result.steps} steps, held-out exact match {accuracy}, model {result.model_dir}")  # noqa: T201
    return 0


def reward_model(args: argparse.Namespace) -> int:
    """Train a reward model and print its held-out pairwise accuracy and the folder `reward_model.path` takes."""
    config = load_config(RMConfig, args.config, args.overrides)
    result = run_rm(config)
    print(  # noqa: T201 - the command's report to its user
        f"RM: {result.steps} steps on {result.train_pairs} pairs in {result.seconds:.1f} s, held-out pairwise "
        f"accuracy {result.heldout_accuracy_before:.3f} before -> {result.heldout_accuracy:.3f} after "
        f"({result.heldout_pairs} pairs), model {result.model_dir}"
    )
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """Score a model folder on a GSM8K-format file (greedy exact match, or pass@k with sampling), or with `--env`
    a VLA folder's success rate per task on the env's trials."""
    if args.env is not None:
        return evaluate_in_env(args)
    if args.data is None:
        raise RecipeError("eval: give --data (a GSM8K-format file) for a language model, or --env for a VLA")
    samples = load_math_dataset(args.data)
    tokenizer = load_tokenizer(args.model)
    result = evaluate_math(
        args.model,
        samples,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        samples_per_prompt=args.k,
        temperature=args.temperature,
        seed=args.seed,
    )
    print(  # noqa: T201
        f"{args.model} on {args.data}: mean reward {result.mean_reward:.3f}, pass@{result.k} {result.pass_at_k:.3f} "
        f"over {result.num_prompts} prompts"
    )
    return 0


def evaluate_in_env(args: argparse.Namespace) -> int:
    """A VLA folder's success rate per task on trials `--first-trial ..` of each task of `--env`."""
    env = EnvConfig(
        name=args.env, tasks=tuple(args.tasks), num_trials=args.first_trial + args.trials, max_steps=args.max_steps
    )
    trials = range(args.first_trial, args.first_trial + args.trials)
    result = evaluate_policy(args.model, env, list(trials), temperature=args.temperature, seed=args.seed)
    lines = [f"{args.model} in {args.env}: success {result.success_rate:.3f} over {result.episodes} episodes"]
    lines += [f"  {name}: {rate:.3f}" for name, rate in result.per_task.items()]
    print("\n".join(lines))  # noqa: T201
    return 0


def export(args: argparse.Namespace) -> int:
    """Write a Hugging Face folder from a training checkpoint."""
    from rl_recipes.cli._export import export_checkpoint

    folder = export_checkpoint(Path(args.checkpoint), Path(args.out))
    print(f"exported {args.checkpoint} to {folder}")  # noqa: T201
    return 0


def list_components(args: argparse.Namespace) -> int:
    """Print the registered recipes and pipelines with their descriptions, and the advantage estimators, policy losses
    and reward functions, the installed `rl_core.plugins` included (the names a run config accepts)."""
    load_plugins()
    sections = {
        "recipes": {name: recipe.summary for name, recipe in RECIPES.items()},
        "pipelines": {name: get_pipeline(name).description for name in PIPELINES},
        "advantage estimators": dict.fromkeys(ADVANTAGE_ESTIMATORS, ""),
        "policy losses": dict.fromkeys(POLICY_LOSSES, ""),
        "reward functions": dict.fromkeys(REWARD_FUNCTIONS, ""),
    }
    lines = []
    for title, entries in sections.items():
        lines.append(f"{title}:")
        lines.extend(f"  {name:<22}{summary}".rstrip() for name, summary in sorted(entries.items()))
    print("\n".join(lines))  # noqa: T201
    return 0
