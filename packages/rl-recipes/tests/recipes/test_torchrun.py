"""`torchrun --nproc-per-node 2 -m rl_recipes train grpo`: two ranks over gloo, no Ray, 2 steps on the embedded
default (its warm start included, on both ranks, and samples rebalanced across the ranks); then the same run folder
resumed under Ray for a third step, so the two launchers' checkpoints are one format. The ranks run the CLI through a
wrapper that fails a rank whose process imported Ray: a torchrun launch runs without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rl_recipes.recipes import get_recipe, load_recipe_config, run_recipe
from rl_runtime.metrics import read_metrics_jsonl

pytestmark = pytest.mark.slow

TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
TIMEOUT_S = 600
VARYING_REWARD = "def reward(response_text, ground_truth, **extra):\n    return float(len(response_text) % 3 == 0)\n"
NO_RAY_MAIN = """
import runpy, sys
try:
    runpy.run_module("rl_recipes", run_name="__main__", alter_sys=True)
except SystemExit as done:
    code = done.code
ray = sorted(name for name in sys.modules if name == "ray" or name.startswith("ray."))
if ray:
    print(f"a torchrun rank imported Ray: {ray[:5]}", file=sys.stderr)
    sys.exit(3)
sys.exit(code)
"""


def _overrides(workspace: Path) -> list[str]:
    sft = workspace / "sft"
    return [
        f"warm_start.output_dir={sft}",
        "warm_start.steps=2",
        f"data.train_files=[{sft}/data/train.jsonl]",
        "data.val_files=[]",
        f"actor.model.path={sft}/model",
        f"task.reward={workspace}/reward.py:reward",
        "batch.prompts_per_step=4",
        "batch.samples_per_prompt=4",
        "rollout.max_new_tokens=8",
        "trainer.checkpoint_every=2",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={workspace}/run",
    ]


def test_torchrun_trains_two_steps_and_ray_resumes_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a local test cluster needs no token (Ray >= 2.5x warns)
    (tmp_path / "reward.py").write_text(VARYING_REWARD)
    (tmp_path / "rank_main.py").write_text(NO_RAY_MAIN)
    overrides = _overrides(tmp_path)
    env = {name: value for name, value in os.environ.items() if name not in TORCHRUN_ENV}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    # Rebalancing across ranks too: its samples cross ranks over torch.distributed instead of the coordinator.
    command += [
        str(tmp_path / "rank_main.py"),  # `-m rl_recipes`, checking that no rank imported Ray
        "train",
        "grpo",
        *overrides,
        "trainer.total_steps=2",
        "batch.balance_across_ranks=samples",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)

    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("recipe grpo: 2 steps") == 1  # rank 0 reports, rank 1 does not
    run_dir = tmp_path / "run"
    log = (run_dir / "train.log").read_text()
    assert "rank 0 of 2 started its worker" in log and "DAGWorker" not in log
    assert "rank 1 of 2 started its worker" in (run_dir / "train.rank1.log").read_text()
    checkpoint = run_dir / "checkpoints" / "step_00000002"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step"] == 2
    assert (checkpoint / "rank_0.pt").is_file() and (checkpoint / "rank_1.pt").is_file()
    spmd_records = read_metrics_jsonl(run_dir / "metrics.jsonl")
    assert sorted(spmd_records) == [1, 2]
    assert all("global_seqlen/balanced_max" in spmd_records[step] for step in (1, 2))

    # The same folder under Ray (this process has no torchrun variables): resumes after step 2, runs step 3.
    config = load_recipe_config("grpo", overrides=[*overrides, "trainer.total_steps=3"])
    result = run_recipe(get_recipe("grpo"), config)

    assert (result.train.start_step, result.train.end_step) == (2, 3)
    records = read_metrics_jsonl(run_dir / "metrics.jsonl")
    assert sorted(records) == [1, 2, 3]
    assert "actor/pg_loss" in records[3] and records[3]["perf/driver_received_bytes"] > 0
    assert json.loads((run_dir / "checkpoints" / "step_00000003" / "trainer_state.json").read_text())["step"] == 3
