"""`rl-recipes train agentic` through the real runtime with tiny settings: a 3-step warm start, two GRPO steps over
whole tool_calling episodes, and the run folder: conversations before and after, the curves, the summary and the
per-step success and tool-call rates in metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_recipes.agentic import FAILURE_KINDS, SUCCESS_METRIC, TOOL_CALL_METRIC
from rl_recipes.recipes import SUMMARY_FILE, get_recipe, load_recipe_config, run_recipe
from rl_recipes.recipes.agentic import AFTER_FILE, BEFORE_FILE, CURVES_FILE
from rl_runtime.metrics import read_metrics_jsonl

pytestmark = pytest.mark.slow


def test_two_agentic_steps_write_the_run_folder(tmp_path: Path, ray_cluster: None) -> None:
    overrides = [
        f"warm_start.output_dir={tmp_path}/sft",
        f"actor.model.path={tmp_path}/sft/model",
        "warm_start.steps=3",
        "warm_start.num_demos=8",
        "task.problems.train_size=16",
        "task.problems.heldout_size=2",
        f"data.train_files=[{tmp_path}/data/train.jsonl]",
        f"heldout_file={tmp_path}/data/heldout.jsonl",
        "conversations=2",
        "batch.prompts_per_step=2",
        "batch.samples_per_prompt=2",
        "trainer.total_steps=2",
        "trainer.checkpoint_every=2",
        "trainer.steps_per_call=1",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={tmp_path}/run",
    ]
    config = load_recipe_config("agentic", overrides=overrides)
    result = run_recipe(get_recipe("agentic"), config)

    run_dir = tmp_path / "run"
    assert result.run_dir == run_dir and result.train.end_step == 2
    records = read_metrics_jsonl(run_dir / "metrics.jsonl")
    assert sorted(records) == [1, 2]
    for step in (1, 2):
        assert 0.0 <= records[step][SUCCESS_METRIC] <= 1.0 and 0.0 <= records[step][TOOL_CALL_METRIC] <= 1.0
        assert records[step]["rollout/episodes_accepted"] > 0 and "actor/pg_loss" in records[step]
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    assert summary["recipe"] == "agentic" and summary["heldout_questions"] == 2
    assert summary["heldout_success_before"] == result.heldout_before
    assert summary["heldout_success_after"] == result.heldout_after is not None
    for key in ("heldout_outcomes_before", "heldout_outcomes_after"):
        assert tuple(summary[key]) == FAILURE_KINDS and sum(summary[key].values()) == 2
    for name in (BEFORE_FILE, AFTER_FILE):
        text = (run_dir / name).read_text()
        assert text.count("## Episode") == 2 and "**user**: `What is " in text
    assert (run_dir / CURVES_FILE).stat().st_size > 0 and (run_dir / "final_model" / "tokenizer.json").is_file()
