"""Algorithm settings that only a whole run exercises, each through 2 Trainer steps on 2 Ray CPU slots: ReMax (the
greedy-baseline node), the rollout importance-sampling correction (`algorithm.rollout_correction`), a multi-turn
rollout workflow loaded from a file (`rollout.workflow`), and a policy loss that an installed plugin registers
through the `rl_core.plugins` entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rl_runtime.trainer import Trainer

from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow
VERL_IS_METRICS = (
    "rollout_corr/rollout_is_mean",
    "rollout_corr/rollout_is_std",
    "rollout_corr/rollout_is_min",
    "rollout_corr/rollout_is_max",
    "rollout_corr/rollout_is_eff_sample_size",
    "rollout_corr/rollout_is_ratio_fraction_high",
    "rollout_corr/rollout_is_ratio_fraction_low",
)


@pytest.mark.parametrize(
    ("correction", "fraction"),
    [
        ({"mode": "tis"}, "rollout_corr/rollout_is_truncated_fraction"),
        ({"mode": "mis", "level": "sequence", "upper": 4.0}, "rollout_corr/rollout_is_masked_fraction"),
    ],
)
def test_rollout_correction_trains_and_reports_verl_metrics(
    tmp_path: Path, ray_runtime: None, correction: dict[str, object], fraction: str
) -> None:
    config = tiny_config(tmp_path, algorithm={"rollout_correction": correction}, total_steps=2, checkpoint_every=2)
    result = Trainer(config, TokenTask).fit()

    assert result.end_step == 2 and len(result.history) == 2
    for metrics in result.history:
        assert metrics["actor/grad_norm"] > 0
        for name in (*VERL_IS_METRICS, fraction):
            assert name in metrics, name
        # The HF rollout engine and the trainer compute in float32 from the same weights: the ratios are ~1.
        assert metrics["rollout_corr/rollout_is_mean"] == pytest.approx(1.0, abs=0.05)
        assert 0 < metrics["rollout_corr/rollout_is_eff_sample_size"] <= 1.0 + 1e-6
        assert metrics["rollout_corr/rollout_is_min"] <= metrics["rollout_corr/rollout_is_max"]
        assert 0 <= metrics[fraction] <= 1


def test_remax_trains_against_the_greedy_baseline(tmp_path: Path, ray_runtime: None) -> None:
    algorithm = {"adv_estimator": "remax", "kl": {"mode": "none", "coef": 0.0}}
    config = tiny_config(tmp_path, pipeline="remax", algorithm=algorithm, total_steps=2, checkpoint_every=2)
    result = Trainer(config, TokenTask).fit()

    assert result.end_step == 2 and len(result.history) == 2
    for metrics in result.history:
        assert metrics["actor/grad_norm"] > 0
        assert 0 <= metrics["reward/greedy_baseline/mean"] <= 1  # TokenTask scores 0 or 1
        assert metrics["timing_s/greedy"] > 0


MULTI_TURN_WORKFLOW = Path(__file__).parents[1] / "nodes" / "multi_turn_workflow.py"


def test_multi_turn_workflow_trains_through_the_trainer(tmp_path: Path, ray_runtime: None) -> None:
    rollout = {"workflow": f"{MULTI_TURN_WORKFLOW}:ToolEchoWorkflow", "workflow_kwargs": {"tokens_per_turn": 3}}
    config = tiny_config(tmp_path, rollout=rollout, total_steps=2, checkpoint_every=2)
    result = Trainer(config, TokenTask).fit()

    assert result.end_step == 2 and len(result.history) == 2
    for metrics in result.history:
        assert metrics["actor/grad_norm"] > 0
        assert metrics["rollout/episodes_accepted"] == 8  # per rank: 2 prompts x 4 samples, none rejected
        assert metrics["rollout/turns_mean"] == 2 and metrics["rollout/engine_calls"] == 2
        assert metrics["reward/workflow_scored_frac"] == 1.0
        # Two 3-token model turns around a 2-token tool reply: 6 of the 8 response tokens carry the loss.
        assert metrics["response_length/mean"] == 8


PLUGIN_SITE = Path(__file__).parent / "plugin_site"
"""A folder holding the `rl_test_plugin` package and its dist-info (entry point `rl_core.plugins`): on PYTHONPATH,
`importlib.metadata` finds it as an installed distribution."""
PLUGIN_RUN_TIMEOUT_S = 600


def test_plugin_loss_from_an_installed_package_trains_in_the_workers(tmp_path: Path) -> None:
    # A fresh process with the plugin installed (on PYTHONPATH), so Ray's workers inherit it as they would a
    # site-packages install; nothing in the driver imports the plugin but rl_core.load_plugins.
    script = textwrap.dedent(
        f"""
        import json, os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import ray
        from pathlib import Path
        from _task import TokenTask, tiny_config
        from rl_runtime.trainer import Trainer
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        config = tiny_config(
            Path({str(tmp_path)!r}), algorithm={{"policy_loss": "test_plugin_ppo"}}, total_steps=2, checkpoint_every=2
        )
        result = Trainer(config, TokenTask).fit()
        print("RESULT " + json.dumps({{"driver_pid": os.getpid(), "history": result.history}}))
        """
    )
    path = os.pathsep.join(filter(None, [str(PLUGIN_SITE), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "RAY_AUTH_MODE": "disabled"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=PLUGIN_RUN_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert len(result["history"]) == 2
    for metrics in result["history"]:
        assert metrics["actor/grad_norm"] > 0
        assert metrics["actor/plugin_pid"] > 0 and metrics["actor/plugin_pid"] != result["driver_pid"]
