"""Two steps of every recipe on the embedded default through the real runtime (2 Ray CPU slots), the run
folder's contents, `export` of the last checkpoint to a folder transformers loads, and two GRPO steps whose episodes
an OpenAI-SDK agent drives (`rollout.workflow: openai_agent`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_recipes.cli import main
from rl_recipes.embedded import build_embedded_tokenizer, save_embedded_tokenizer
from rl_recipes.recipes import CURVE_FILE, SUMMARY_FILE, get_recipe, load_recipe_config, run_recipe
from rl_recipes.tasks import load_tokenizer
from rl_runtime.metrics import read_metrics_jsonl

pytestmark = pytest.mark.slow
RECIPES = ["grpo", "dr_grpo", "rloo", "reinforce_plus_plus", "ppo", "dapo", "remax"]
VARYING_REWARD = "def reward(response_text, ground_truth, **extra):\n    return float(len(response_text) % 3 == 0)\n"
"""A plug-in reward that varies between samples even for an untrained model, so DAPO's filter keeps groups."""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("smoke")
    (folder / "reward.py").write_text(VARYING_REWARD)
    return folder


def _overrides(workspace: Path, recipe: str) -> list[str]:
    sft = workspace / "sft"
    return [
        f"warm_start.output_dir={sft}",
        "warm_start.steps=5",
        f"data.train_files=[{sft}/data/train.jsonl]",
        f"data.val_files=[{sft}/data/heldout.jsonl]",
        f"actor.model.path={sft}/model",
        *([f"critic.model.path={sft}/model"] if recipe == "ppo" else []),
        f"task.reward={workspace}/reward.py:reward",
        "batch.prompts_per_step=4",
        "batch.samples_per_prompt=4",
        "rollout.max_new_tokens=8",
        "trainer.total_steps=2",
        "trainer.validate_every=2",
        "trainer.checkpoint_every=2",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={workspace}/{recipe}",
    ]


@pytest.mark.parametrize("recipe", RECIPES)
def test_two_steps_write_the_run_folder(recipe: str, workspace: Path, ray_cluster: None) -> None:
    config = load_recipe_config(recipe, overrides=_overrides(workspace, recipe))
    result = run_recipe(get_recipe(recipe), config)

    run_dir = workspace / recipe
    assert result.train.end_step == 2 and len(result.train.history) == 2
    assert sorted(read_metrics_jsonl(run_dir / "metrics.jsonl")) == [0, 1, 2]  # 0: validation before training
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    assert summary["recipe"] == recipe and summary["steps"] == 2
    assert summary["heldout_reward_before"] is not None and summary["heldout_reward_after"] is not None
    assert (run_dir / CURVE_FILE).stat().st_size > 0
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "checkpoints" / "step_00000002" / "trainer_state.json").is_file()
    if recipe == "ppo":
        assert "critic/vf_loss" in result.train.history[-1]
    if recipe == "dapo":
        assert result.train.history[-1]["dynamic_sampling/num_draws"] >= 1
    if recipe == "remax":
        assert "reward/greedy_baseline/mean" in result.train.history[-1]


def test_export_writes_a_folder_transformers_loads(workspace: Path, ray_cluster: None) -> None:
    from transformers import AutoModelForCausalLM

    checkpoint = workspace / "grpo" / "checkpoints" / "step_00000002"
    if not checkpoint.is_dir():
        pytest.skip("needs the grpo smoke run of this module")
    out = workspace / "exported"
    assert main(["export", str(checkpoint), "--out", str(out)]) == 0
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = load_tokenizer(out)
    assert model.config.vocab_size == len(tokenizer)


async def two_turn_agent(client: Any, data: Any) -> float:
    """An OpenAI-SDK agent for the openai_agent run below: asks, follows up, scores the reply's length parity."""
    messages: list[Any] = [{"role": "user", "content": "What is 1 + 1?"}]
    first = await client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "user", "content": "Sure?"})
    final = await client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
    return float(len(final.choices[0].message.content or "") % 2)


def test_openai_agent_workflow_trains_two_steps(workspace: Path, ray_cluster: None) -> None:
    # The tokenizer folder must exist when the config loads (the workflow is built then); the SFT model does not yet.
    tokenizer = save_embedded_tokenizer(build_embedded_tokenizer(), workspace / "agent_tokenizer")
    overrides = [
        *_overrides(workspace, "grpo"),
        f"trainer.output_dir={workspace}/openai_agent",
        "rollout.workflow=rl_recipes.workflows:OpenAIAgentWorkflow",
        f"rollout.workflow_kwargs={{tokenizer: {tokenizer}, agent: {__file__}:two_turn_agent}}",
    ]
    result = run_recipe(get_recipe("grpo"), load_recipe_config("grpo", overrides=overrides))

    assert result.train.end_step == 2
    for metrics in result.train.history:
        assert metrics["rollout/episodes_accepted"] == 8  # per rank: 2 prompts x 4 samples, none rejected
        assert metrics["rollout/turns_mean"] == 2 and metrics["reward/workflow_scored_frac"] == 1.0
        assert metrics["actor/grad_norm"] > 0


@pytest.fixture(scope="module")
def reward_model_dir(workspace: Path) -> Path:
    from rl_recipes.rm import RMConfig, run_rm

    rm = run_rm(RMConfig(steps=2, pairs=16, heldout_pairs=8, batch_size=8, output_dir=str(workspace / "rm")))
    return rm.model_dir


@pytest.mark.parametrize("placement", ["colocate", "slot"])
def test_a_reward_model_scores_through_the_trainer(
    placement: str, reward_model_dir: Path, workspace: Path, ray_cluster: None
) -> None:
    # placement.slots=2 either way: colocated, the policy runs on both and loads the reward model in each; "slot"
    # gives the reward model one slot of its own (its Ray actor) and the policy the other.
    overrides = [
        *_overrides(workspace, "grpo"),
        f"trainer.output_dir={workspace}/grpo_rm_{placement}",
        f"reward_model={{path: {reward_model_dir}, weight: 2.0, placement: {placement}}}",
        "algorithm.rule_reward_weight=0.5",
        "data.val_files=[]",  # the reward path only: no validation passes
        "trainer.validate_every=0",
    ]
    result = run_recipe(get_recipe("grpo"), load_recipe_config("grpo", overrides=overrides))

    assert result.train.end_step == 2
    for metrics in result.train.history:
        assert metrics["reward/model_min"] <= metrics["reward/model_mean"] <= metrics["reward/model_max"]
        assert metrics["reward/model_truncated_frac"] == 0.0 and metrics["timing_s/reward_model"] > 0
