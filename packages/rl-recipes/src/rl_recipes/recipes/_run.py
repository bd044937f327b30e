"""The plumbing every RL recipe shares around its Trainer: before it, the checks, the warm start when its model is
missing and the run folder's config; after it, the held-out reward before and after, the reward curve and the
summary. A recipe module calls `start_run`, builds its task and Trainer, then `finish_run`."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_recipes._errors import RecipeError
from rl_recipes.recipes import sft
from rl_recipes.recipes._config import RecipeConfig
from rl_recipes.recipes._plot import plot_reward_curve
from rl_recipes.recipes._registry import Recipe
from rl_recipes.rewards import RewardLoadError, load_reward_function
from rl_runtime.config import RunConfig, dump_config_yaml
from rl_runtime.metrics import read_metrics_jsonl
from rl_runtime.trainer import RunLock, TrainResult, resolve_launch, spmd_barrier

logger = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"
CONFIG_FILE = "config.yaml"
CURVE_FILE = "reward_curve.png"
METRICS_FILE = "metrics.jsonl"
HELDOUT_METRIC = "val/reward/mean@{k}"
JSONL_SINK = "jsonl"


@dataclass(frozen=True)
class RecipeResult:
    """A finished recipe run: the training result, the held-out reward before and after, and the files written."""

    recipe: str
    train: TrainResult
    heldout_before: float | None
    """Held-out mean reward of the starting policy (the warm-started model), from the pre-training validation."""
    heldout_after: float | None
    run_dir: Path
    curve: Path | None


def prepare_warm_start(config: RecipeConfig) -> None:
    """Run the supervised warm start unless its model folder already exists (a resumed or repeated run)."""
    target, warm_start = config.warm_start_model, config.warm_start
    if target is None or warm_start is None:  # one is None exactly when the other is
        return
    if target.is_dir():
        logger.info("warm start: reusing %s", target)
        return
    logger.info("warm start: supervised fine-tuning into %s", target)
    result = sft.run(warm_start)
    logger.info("warm start done: held-out exact match %s", result.heldout_exact_match)


def check_reward(config: RecipeConfig) -> None:
    """Load `task.reward` here, in the driver, so that a bad spec fails before the warm start and the workers
    (which load it again) with a `RewardLoadError` naming the field."""
    try:
        load_reward_function(config.task.reward)
    except RewardLoadError as error:
        raise RewardLoadError(f"task.reward: {error}") from error


def check_models(config: RecipeConfig) -> None:
    """Every `<section>.model.path` that is set names a folder, or a `RecipeError` names the section; checked in the
    driver after the warm start (which writes its model) so a typo stops the run before any worker starts."""
    for section in ("actor", "critic", "reference"):
        engine = getattr(config, section)
        path = None if engine is None else engine.model.path
        if path is not None and not Path(path).is_dir():
            raise RecipeError(
                f"{section}.model.path: {path!r} is not a folder (relative to {str(Path.cwd())!r}); point it at a "
                "Hugging Face model folder, or at <warm_start.output_dir>/model with a warm start"
            )


def start_run(recipe: Recipe, config: RecipeConfig) -> Path:
    """Check `config` against `recipe` and its reward, warm-start if configured, check the model folders and write
    the run folder's config (holding the folder's lock, so a second run into it is refused before it writes
    anything); the folder. Under torchrun every rank calls it: the warm start runs on all ranks together (SFT
    shards its rows over them) and rank 0 writes the config."""
    recipe.check(config)
    check_reward(config)
    launch = resolve_launch(config)  # under torchrun: a world size that is not placement.slots stops every rank here
    run_dir = Path(config.trainer.output_dir)
    with RunLock(run_dir, take_over=config.trainer.take_over):  # rank 0's alone under torchrun
        # Every torchrun rank sees the same folders before the warm start, which then runs on all of them together.
        spmd_barrier(launch, config.trainer.step_timeout_s)
        prepare_warm_start(config)
        check_models(config)
        if launch.is_leader:
            (run_dir / CONFIG_FILE).write_text(dump_config_yaml(config))
    return run_dir


def run_records(config: RunConfig, result: TrainResult) -> dict[int, dict[str, Any]]:
    """The whole run's metrics by step (0: the validation before training): `metrics.jsonl`, which spans every
    resume, when the run writes it; otherwise only what this process ran."""
    path = Path(config.trainer.output_dir) / METRICS_FILE
    if JSONL_SINK in config.trainer.log_sinks and path.is_file():
        return read_metrics_jsonl(path)
    if result.start_step > 0:
        logger.warning(
            "trainer.log_sinks has no %s, so the steps before this resumed process (%d) are missing from %s and %s",
            JSONL_SINK,
            result.start_step,
            SUMMARY_FILE,
            CURVE_FILE,
        )
    records: dict[int, dict[str, Any]] = {step: dict(metrics) for step, metrics in result.validations}
    for offset, metrics in enumerate(result.history):
        records[result.start_step + 1 + offset] = dict(metrics)
    return records


def finish_run(recipe: Recipe, config: RecipeConfig, result: TrainResult) -> RecipeResult:
    """The held-out reward before and after training, the reward curve and `summary.json` of `result`'s run, over
    every step of the run (the held-out value before training survives any number of resumes)."""
    run_dir = Path(config.trainer.output_dir)
    key = HELDOUT_METRIC.format(k=config.rollout.val_samples_per_prompt)
    records = run_records(config, result)
    before = records.get(0, {}).get(key)
    after = next((records[step][key] for step in sorted(records, reverse=True) if key in records[step]), None)
    if not resolve_launch(config).is_leader:  # a torchrun rank other than 0: rank 0 writes the run folder's files
        return RecipeResult(recipe.name, result, before, after, run_dir, None)
    with RunLock(run_dir, take_over=config.trainer.take_over):
        curve = plot_reward_curve(records, run_dir / CURVE_FILE, heldout_key=key)
        summary = {
            "recipe": recipe.name,
            "steps": result.end_step,
            "heldout_reward_before": before,
            "heldout_reward_after": after,
            "heldout_lift": None if before is None or after is None else after - before,
            "last_checkpoint": str(result.last_checkpoint) if result.last_checkpoint else None,
            "metrics_file": str(run_dir / METRICS_FILE),
        }
        (run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    return RecipeResult(recipe.name, result, before, after, run_dir, curve)


def run_recipe(recipe: Recipe, config: RecipeConfig) -> RecipeResult:
    """Run `recipe` on `config`: its module's `run` (checks, warm start, task, Trainer, summary)."""
    with RunLock(Path(config.trainer.output_dir), take_over=config.trainer.take_over):  # the whole run, one lock
        result: RecipeResult = recipe.run(config)
    return result
