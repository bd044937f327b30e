"""SRPO (Fei et al. 2025): VLA-GRPO on environment episodes whose failures are scored by their video embedding's
distance to the same task's successes; `algorithm.reward=binary` is its GRPO baseline.

    rl-recipes train srpo                              # BabyAI GoToRedBallNoDists, tiny VLA, CPU
    rl-recipes train srpo algorithm.reward=binary      # the baseline, same rollouts budget

`run` is the whole run: the checks; the (task, trial) pools written as prompt files; the warm start (a tiny VLA
behaviour-cloned on bot demonstrations) when its folder is missing; the Trainer over `embodied_srpo`; then the
success curve, a frame strip of held-out episodes before and after, and the summary. Each reward writes its own
run folder (`<trainer.output_dir>/<reward>`), so the two runs sit side by side and each curve shows both.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import attrs

from rl_core.envs import EnvConfig
from rl_engines.vla import VLAPolicy
from rl_recipes._errors import RecipeError
from rl_recipes.embodied import (
    EmbodiedTask,
    EmbodiedTaskFactory,
    SRPORecipeConfig,
    draw_frame_strip,
    play_episodes,
    plot_success_curve,
    probe_env,
    read_metrics,
    warm_start,
)
from rl_recipes.recipes._registry import Recipe, expect, register_recipe
from rl_recipes.recipes._run import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, RecipeResult, run_records
from rl_runtime.config import RewardKind, dump_config_yaml
from rl_runtime.nodes import Episode
from rl_runtime.trainer import Trainer, TrainResult, build_actor

logger = logging.getLogger(__name__)

PIPELINE = "embodied_srpo"
CHECKS = (
    expect("pipeline", PIPELINE, "the embodied SRPO pipeline"),
    expect("algorithm.adv_estimator", "grpo", "group-relative advantages over each (task, trial)'s episodes"),
)
SUCCESS_CURVE = "success_curve.png"
FRAME_STRIP = "rollouts.png"
FINAL_MODEL = "final_model"
HELDOUT_KEY = "val/reward/mean@{k}"
"""Held-out success rate: the mean over the `rollout.val_samples_per_prompt` episodes of every held-out trial."""
_ACTOR_DIR = "actor"


def pool_rows(tasks: int, first_trial: int, trials: int) -> list[dict[str, int]]:
    """The prompt rows of trials `first_trial .. first_trial + trials - 1` of every task."""
    return [{"task_id": t, "trial_id": k} for t in range(tasks) for k in range(first_trial, first_trial + trials)]


def _write_rows(path: Path, rows: Sequence[dict[str, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def with_run_dir(config: SRPORecipeConfig) -> SRPORecipeConfig:
    """`config` writing into `<trainer.output_dir>/<algorithm.reward>` (srpo or binary)."""
    folder = Path(config.trainer.output_dir) / config.algorithm.reward.value
    return attrs.evolve(config, trainer=attrs.evolve(config.trainer, output_dir=folder))


def prepare(config: SRPORecipeConfig, env: EnvConfig) -> Path:
    """Write the training and held-out pools; warm-start the VLA unless its folder exists; the model folder."""
    tasks = len(probe_env(env)[0].task_names)
    _write_rows(Path(config.data.train_files[0]), pool_rows(tasks, 0, config.train_trials))
    if config.data.val_files:
        _write_rows(Path(config.data.val_files[0]), pool_rows(tasks, config.train_trials, config.heldout_trials))
    model_dir = Path(str(config.actor.model.path))
    if model_dir.is_dir():
        logger.info("warm start: reusing %s", model_dir)
    elif config.warm_start is None:
        raise RecipeError(f"actor.model.path: {model_dir} does not exist and warm_start is null; set one of them")
    else:
        warm_start(env, config.warm_start, config.train_trials, model_dir)
    return model_dir


def strip_episodes(config: SRPORecipeConfig, env: EnvConfig, policy: VLAPolicy, task: EmbodiedTask) -> list[Episode]:
    """`strip_episodes` greedy held-out episodes of `policy` (the first held-out trials of task 0)."""
    count = config.strip_episodes
    trials = [config.train_trials + i for i in range(count)]
    return play_episodes(env, policy, task.encode_instruction, [0] * count, trials)


def export_policy(config: SRPORecipeConfig, checkpoint: Path, total_steps: int, out: Path) -> Path:
    """Load the actor of `checkpoint` (a run of `config`) in this process and write the VLA folder `out` (config,
    weights, word tokenizer) that `VLAPolicy.from_pretrained` and `rl-recipes eval --env` load."""
    actor = build_actor(config, total_steps=total_steps)
    actor.load_checkpoint(checkpoint / _ACTOR_DIR)
    return actor.export_hf(out)


def final_policy(config: SRPORecipeConfig, result: TrainResult, run_dir: Path) -> VLAPolicy | None:
    """The trained policy, exported from the last checkpoint into `<run>/final_model`; None without a checkpoint."""
    if result.last_checkpoint is None:
        return None
    folder = export_policy(config, result.last_checkpoint, result.end_step, run_dir / FINAL_MODEL)
    return VLAPolicy.from_pretrained(folder)


def run(config: SRPORecipeConfig) -> RecipeResult:
    """Train `config`: pools and warm start, the Trainer over `PIPELINE`, then curve, frame strip and summary."""
    RECIPE.check(config)
    config = with_run_dir(config)
    env = config.env
    if env is None:  # RunConfig refuses embodied_srpo without an env; kept for the type checker
        raise RecipeError("env: the SRPO recipe needs an env section")
    run_dir = Path(config.trainer.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(dump_config_yaml(config))
    model_dir = prepare(config, env)
    task = EmbodiedTaskFactory(str(model_dir))
    before = strip_episodes(config, env, VLAPolicy.from_pretrained(model_dir), task())
    result = Trainer(config, task).fit()
    policy = final_policy(config, result, run_dir)
    after = [] if policy is None else strip_episodes(config, env, policy, task())
    draw_frame_strip({"before": before, "after": after}, run_dir / FRAME_STRIP)
    runs = {kind.value: read_metrics(run_dir.parent / kind.value / METRICS_FILE) for kind in RewardKind}
    curve = plot_success_curve({label: records for label, records in runs.items() if records}, run_dir / SUCCESS_CURVE)
    key = HELDOUT_KEY.format(k=config.rollout.val_samples_per_prompt)
    records = run_records(config, result)  # every step of the run, across resumes
    validated = [records[step] for step in sorted(records) if key in records[step]]
    heldout_before = records.get(0, {}).get(key)
    heldout_after = validated[-1][key] if validated else None
    per_task = {k: v for m in validated[-1:] for k, v in m.items() if k.startswith("val/success_rate/")}
    summary = {
        "recipe": RECIPE.name,
        "reward": config.algorithm.reward.value,
        "steps": result.end_step,
        "heldout_success_before": heldout_before,
        "heldout_success_after": heldout_after,
        "heldout_lift": None if heldout_before is None or heldout_after is None else heldout_after - heldout_before,
        "heldout_success_per_task_after": per_task,
        "last_checkpoint": str(result.last_checkpoint) if result.last_checkpoint else None,
    }
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    return RecipeResult(RECIPE.name, result, heldout_before, heldout_after, run_dir, curve)


RECIPE = register_recipe(
    Recipe(
        name="srpo",
        summary=(
            "SRPO: VLA-GRPO on environment episodes, failures rewarded by video-embedding progress toward the task's"
            " successes (algorithm.reward=binary: the GRPO baseline)."
        ),
        config_file="srpo.yaml",
        run=run,
        checks=CHECKS,
        config_class=SRPORecipeConfig,
    )
)
