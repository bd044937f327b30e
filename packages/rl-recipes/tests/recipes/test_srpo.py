"""`rl-recipes train srpo` through the real runtime on BabyAI with tiny settings: two steps write the run folder
(curve, frame strip, summary, per-task validation), the binary baseline gets its own folder, a run SIGKILLed
after its first step's checkpoint resumes to the uninterrupted run's metrics, and the same two steps under split
placement (env rollout on one slot, training on the other, a weight sync each step) reach the same metrics."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
from _recipe_runs import newest_step, train_and_signal

from rl_engines.vla import VLAPolicy
from rl_recipes.recipes import SUMMARY_FILE, get_recipe, load_recipe_config, run_recipe
from rl_recipes.recipes.srpo import FRAME_STRIP, SUCCESS_CURVE
from rl_runtime.metrics import read_metrics_jsonl

pytestmark = pytest.mark.slow
# Decided by the run's seeds: the rollouts, rewards and the update (timings and throughput are not).
DETERMINISTIC = (
    "rollout/success_rate",
    "rollout/finish_step_mean",
    "reward/failure_reward_mean",
    "embodied_sampling/kept_ratio",
    "actor/pg_loss",
    "actor/grad_norm",
    "critic/advantages/mean",
    "val/reward/mean@4",
)
HELDOUT = "val/reward/mean@4"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("srpo")


def _overrides(workspace: Path, run: str, *extra: str) -> list[str]:
    return [
        f"warm_start.output_dir={workspace}/warm_start",
        f"actor.model.path={workspace}/warm_start/model",
        "warm_start.steps=10",
        "warm_start.num_demos=4",
        f"data.train_files=[{workspace}/pools/train.jsonl]",
        f"data.val_files=[{workspace}/pools/heldout.jsonl]",
        "train_trials=4",
        "heldout_trials=4",
        "strip_episodes=2",
        "env.num_trials=8",
        "env.num_envs=16",
        "env.max_steps=24",
        "batch.prompts_per_step=4",
        "batch.samples_per_prompt=4",
        "rollout.val_temperature=1.0",
        "trainer.total_steps=2",
        "trainer.validate_every=2",
        "trainer.checkpoint_every=1",
        "trainer.keep_last=2",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={workspace}/{run}",
        *extra,
    ]


def test_two_srpo_steps_write_the_run_folder(workspace: Path, ray_cluster: None) -> None:
    config = load_recipe_config("srpo", overrides=_overrides(workspace, "full"))
    result = run_recipe(get_recipe("srpo"), config)

    run_dir = workspace / "full" / "srpo"
    assert result.run_dir == run_dir and result.train.end_step == 2
    records = read_metrics_jsonl(run_dir / "metrics.jsonl")
    assert sorted(records) == [0, 1, 2]  # 0: validation of the warm-started policy
    last = records[2]
    assert 0.0 <= last["rollout/success_rate"] <= 1.0 and "embodied_sampling/kept_ratio" in last
    assert "val/success_rate/task_0" in last and "actor/pg_loss" in last
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    assert summary["reward"] == "srpo" and summary["heldout_success_before"] is not None
    assert set(summary["heldout_success_per_task_after"]) == {"val/success_rate/task_0"}
    for name in (SUCCESS_CURVE, FRAME_STRIP):
        assert (run_dir / name).stat().st_size > 0
    assert (run_dir / "final_model" / "word_tokenizer.json").is_file()


def test_the_binary_baseline_gets_its_own_folder(workspace: Path, ray_cluster: None) -> None:
    overrides = _overrides(workspace, "full", "algorithm.reward=binary", "trainer.total_steps=1")
    result = run_recipe(get_recipe("srpo"), load_recipe_config("srpo", overrides=overrides))
    assert result.run_dir == workspace / "full" / "binary" and result.train.start_step == 0
    assert json.loads((result.run_dir / SUMMARY_FILE).read_text())["reward"] == "binary"
    assert (workspace / "full" / "srpo" / "metrics.jsonl").is_file()  # the SRPO run's folder is untouched


def _same_metrics(run_dir: Path, expected: dict[int, dict[str, float]], steps: tuple[int, ...] = (0, 1, 2)) -> None:
    records = read_metrics_jsonl(run_dir / "metrics.jsonl")
    assert tuple(sorted(records)) == steps
    for step in (1, 2):
        names = [name for name in DETERMINISTIC if name in expected[step]]
        assert "actor/pg_loss" in names and set(names) <= set(records[step]), (step, names)
        for name in names:
            assert records[step][name] == pytest.approx(expected[step][name], rel=1e-6, abs=1e-7), (step, name)


def test_a_sigkilled_run_resumes_to_the_uninterrupted_metrics(workspace: Path, ray_cluster: None) -> None:
    uninterrupted = workspace / "full" / "srpo" / "metrics.jsonl"
    if not uninterrupted.is_file():
        pytest.skip("needs the two-step run of this module")
    run_dir = workspace / "killed" / "srpo"
    overrides = _overrides(workspace, "killed")
    status, _ = train_and_signal("srpo", overrides, signal.SIGKILL, 2, workspace / "killed.log")
    assert status == -signal.SIGKILL and newest_step(run_dir) == 1  # killed in step 2, after step 1's checkpoint
    resumed = run_recipe(get_recipe("srpo"), load_recipe_config("srpo", overrides=overrides))
    assert resumed.train.start_step == 1 and resumed.train.end_step == 2
    expected = read_metrics_jsonl(uninterrupted)
    _same_metrics(run_dir, expected)  # step 1 from the killed process, step 2 from the resumed one
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    assert summary["heldout_success_before"] == expected[0][HELDOUT]


def test_export_writes_the_vla_of_a_checkpoint_that_eval_loads(
    workspace: Path, ray_cluster: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from rl_recipes.cli import main

    final = workspace / "full" / "srpo" / "final_model"
    if not final.is_dir():
        pytest.skip("needs the two-step run of this module")
    out = workspace / "exported"
    assert main(["export", str(workspace / "full" / "srpo" / "checkpoints" / "step_00000002"), "--out", str(out)]) == 0
    assert (out / "word_tokenizer.json").is_file()
    exported = VLAPolicy.from_pretrained(out).model.state_dict()
    expected = VLAPolicy.from_pretrained(final).model.state_dict()  # the recipe's own export of the same step
    assert exported.keys() == expected.keys()
    assert all(torch.equal(exported[name], expected[name]) for name in expected)
    argv = ["eval", "--model", str(out), "--env", "babyai", "--first-trial", "4", "--trials", "2", "--max-steps", "16"]
    assert main(argv) == 0
    assert "over 2 episodes" in capsys.readouterr().out


def test_eval_reports_success_per_task_of_the_final_model(
    workspace: Path, ray_cluster: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from rl_recipes.cli import main

    model = workspace / "full" / "srpo" / "final_model"
    if not model.is_dir():
        pytest.skip("needs the two-step run of this module")
    argv = [
        "eval",
        "--model",
        str(model),
        "--env",
        "babyai",
        "--first-trial",
        "4",
        "--trials",
        "2",
        "--max-steps",
        "16",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "in babyai: success" in out and "over 2 episodes" in out and "GoToLocal:" in out


def test_split_placement_reaches_the_colocated_metrics(workspace: Path, ray_cluster: None) -> None:
    colocated = workspace / "full" / "srpo" / "metrics.jsonl"
    if not colocated.is_file():
        pytest.skip("needs the two-step run of this module")
    overrides = _overrides(
        workspace,
        "split",
        "placement.slots=2",
        "placement.colocate=false",
        "trainer.validate_before_train=false",  # cheaper: step 2's validation already runs on the rollout slot
        "strip_episodes=0",
    )
    result = run_recipe(get_recipe("srpo"), load_recipe_config("srpo", overrides=overrides))
    assert result.train.end_step == 2
    records = read_metrics_jsonl(result.run_dir / "metrics.jsonl")
    # the rollout slot samples step 2 from the weights of step 1's update, sent over the weight link
    assert [records[step]["rollout/policy_version"] for step in (1, 2)] == [0.0, 1.0]
    # the accuracy band and the reward ran on the training slot, after the coordinator edge, on the same episodes
    _same_metrics(result.run_dir, read_metrics_jsonl(colocated), steps=(1, 2))
