"""Agentic GRPO: multi-turn additions of large operands that the embedded model answers by calling the `calculator`
tool, reading its result and answering; a warm start on a few tool-using demonstrations, then GRPO over whole
episodes with the `tool_calling` workflow (tool tokens masked out of the loss).

    rl-recipes train agentic                        # the embedded default: tiny model, CPU
    rl-recipes train agentic trainer.total_steps=2  # a smoke run

`run` is the whole run: the checks; the generated questions written as the training file and the held-out file;
the warm start when its model folder is missing; greedy held-out episodes of the starting model; the Trainer over
the `grpo` pipeline; the same held-out episodes of the trained model (exported from the last checkpoint); then the
sample conversations before and after, the success and tool-call curves and `summary.json`.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from rl_recipes._errors import RecipeError
from rl_recipes.agentic import (
    SUCCESS_METRIC,
    TOOL_CALL_METRIC,
    AgenticRecipeConfig,
    AgenticTask,
    AgenticTaskFactory,
    Evaluation,
    evaluate_model,
    generate_problems,
    plot_agentic_curves,
    read_rows,
    warm_start,
    write_conversations,
    write_rows,
)
from rl_recipes.recipes._registry import Recipe, expect, register_recipe
from rl_recipes.recipes._run import CONFIG_FILE, SUMMARY_FILE, RecipeResult, run_records
from rl_recipes.workflows import TOOL_CALLING
from rl_runtime.config import dump_config_yaml
from rl_runtime.trainer import Trainer, TrainResult, build_actor

logger = logging.getLogger(__name__)

PIPELINE = "grpo"
CHECKS = (
    expect("pipeline", PIPELINE, "the GRPO pipeline, over whole episodes"),
    expect("algorithm.adv_estimator", "grpo", "group-relative advantages"),
    expect("rollout.workflow", TOOL_CALLING, "multi-turn episodes that call the calculator"),
)
CURVES_FILE = "agentic_curves.png"
BEFORE_FILE, AFTER_FILE = "conversations_before.md", "conversations_after.md"
FINAL_MODEL = "final_model"
_ACTOR_DIR = "actor"


def prepare(config: AgenticRecipeConfig, task: AgenticTask) -> Path:
    """Write the training and held-out questions; warm-start the model unless its folder exists; the model folder."""
    train, heldout = generate_problems(config.task.problems)
    write_rows(Path(config.data.train_files[0]), train)
    write_rows(Path(config.heldout_file), heldout)
    model_dir = Path(str(config.actor.model.path))
    if model_dir.is_dir():
        logger.info("warm start: reusing %s", model_dir)
    elif config.warm_start is None:
        raise RecipeError(f"actor.model.path: {model_dir} does not exist and warm_start is null; set one of them")
    else:
        warm_start(config.warm_start, task.tokenizer, train, model_dir)
    return model_dir


def evaluate(config: AgenticRecipeConfig, model_dir: Path, task: AgenticTask) -> Evaluation:
    """Greedy held-out episodes of the model in `model_dir`, with the run's workflow settings and token budgets."""
    return evaluate_model(
        model_dir,
        task,
        read_rows(Path(config.heldout_file)),
        config.rollout.workflow_kwargs,
        token_budget=config.data.max_response_length,
        max_new_tokens=config.rollout.max_new_tokens or config.data.max_response_length,
    )


def export_final(config: AgenticRecipeConfig, result: TrainResult, start: Path, out: Path) -> Path | None:
    """The trained model as a Hugging Face folder `out` (the last checkpoint's actor, with the starting folder's
    tokenizer and generation config); None without a checkpoint."""
    if result.last_checkpoint is None:
        return None
    actor = build_actor(config, total_steps=result.end_step)
    actor.load_checkpoint(result.last_checkpoint / _ACTOR_DIR)
    actor.export_hf(out)
    for name in start.iterdir():
        if name.is_file() and not name.name.startswith(("model", "config.json")):
            shutil.copy2(name, out / name.name)
    return out


def run(config: AgenticRecipeConfig) -> RecipeResult:
    """Train `config` (see the module doc); the result's held-out values are success rates."""
    RECIPE.check(config)
    run_dir = Path(config.trainer.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(dump_config_yaml(config))
    task = AgenticTask(config.task)
    model_dir = prepare(config, task)
    before = evaluate(config, model_dir, task)
    logger.info("held-out before RL: success %.3f, tool calls %.3f", before.success_rate, before.tool_call_rate)
    result = Trainer(config, AgenticTaskFactory(config.task)).fit()
    final = export_final(config, result, model_dir, run_dir / FINAL_MODEL)
    after = None if final is None else evaluate(config, final, task)
    if after is not None:
        logger.info("held-out after RL: success %.3f, tool calls %.3f", after.success_rate, after.tool_call_rate)
    shown = config.conversations
    write_conversations(run_dir / BEFORE_FILE, "Held-out conversations before RL", before.episodes[:shown])
    if after is not None:
        write_conversations(run_dir / AFTER_FILE, "Held-out conversations after RL", after.episodes[:shown])
    records = run_records(config, result)
    heldout = None if after is None else (before.success_rate, after.success_rate)
    curve = plot_agentic_curves(records, run_dir / CURVES_FILE, heldout=heldout)
    trained = [records[step] for step in sorted(records) if SUCCESS_METRIC in records[step]]
    summary = {
        "recipe": RECIPE.name,
        "steps": result.end_step,
        "heldout_success_before": before.success_rate,
        "heldout_success_after": None if after is None else after.success_rate,
        "heldout_lift": None if after is None else after.success_rate - before.success_rate,
        "heldout_tool_call_rate_before": before.tool_call_rate,
        "heldout_tool_call_rate_after": None if after is None else after.tool_call_rate,
        "heldout_questions": len(before.episodes),
        "heldout_outcomes_before": before.outcomes(),
        "heldout_outcomes_after": None if after is None else after.outcomes(),
        "train_success_first_last": [trained[0][SUCCESS_METRIC], trained[-1][SUCCESS_METRIC]] if trained else None,
        "train_tool_call_rate_last": trained[-1].get(TOOL_CALL_METRIC) if trained else None,
        "last_checkpoint": str(result.last_checkpoint) if result.last_checkpoint else None,
    }
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    return RecipeResult(
        RECIPE.name, result, before.success_rate, None if after is None else after.success_rate, run_dir, curve
    )


RECIPE = register_recipe(
    Recipe(
        name="agentic",
        summary=(
            "Agentic GRPO: multi-turn additions the embedded model solves by calling the calculator tool; SFT on"
            " tool-using demonstrations, then GRPO over whole episodes (tool tokens masked)."
        ),
        config_file="agentic.yaml",
        run=run,
        checks=CHECKS,
        config_class=AgenticRecipeConfig,
    )
)
