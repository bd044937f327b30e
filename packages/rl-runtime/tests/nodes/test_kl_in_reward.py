"""The in-reward KL penalty in the `compute_advantage` node, by hand on a small batch: the rewards the advantage
estimator sees are the scores minus beta x KL(old log-probs, reference log-probs) per response token, and the node
logs verl's `actor/reward_kl_penalty` and `actor/reward_kl_penalty_coeff` and steps the controller."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rl_core.graph import get_pipeline
from rl_core.kl import AdaptiveKLController, FixedKLController, KLController
from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources, with_fields
from rl_runtime.nodes._advantage import compute_advantage as _compute_advantage
from rl_runtime.nodes._kl_reward import step_kl
from rl_runtime.nodes._reward import compute_reward as _compute_reward
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.workers import NodeContext, StepData

from .test_operations import LengthTask, _rollouts

BETA = 0.5
# Four samples, prompt length 2, response lengths 1, 3, 2, 2 (so T = 5); groups {0, 1} and {2, 3}. LengthTask puts
# each response's length on its last token. old - ref on the response tokens (k1 is that difference):
KL_ON_RESPONSE = [[0.2], [0.1, -0.3, 0.4], [0.0, 0.6], [0.2, 0.2]]
# Rewards = scores - 0.5 x KL per token:
EXPECTED_REWARDS = [
    [0, 0, 1 - 0.1, 0, 0],
    [0, 0, -0.05, 0.15, 3 - 0.2],
    [0, 0, 0.0, 2 - 0.3, 0],
    [0, 0, -0.1, 2 - 0.1, 0],
]
# The batch mean of each sequence's token-mean KL: (0.2 + 0.2/3 + 0.3 + 0.2) / 4.
EXPECTED_KL = (0.2 + 0.2 / 3 + 0.3 + 0.2) / 4
# GRPO on the sequences' reward sums: group {0, 1} 0.9 vs 2.9, group {2, 3} 1.7 vs 1.8. Without the penalty group
# {2, 3} ties at 2 and 2 (advantage 0); with it, each group's two samples sit at -+ 1/sqrt(2) std.
EXPECTED_ADVANTAGES = [-(2**-0.5), 2**-0.5, -(2**-0.5), 2**-0.5]


def _config(tmp_path: Path, kl: dict[str, object]) -> RunConfig:
    (tmp_path / "train.jsonl").write_text('{"ids": [1]}\n' * 4)
    return config_from_dict(
        RunConfig,
        {
            "data": {"train_files": [str(tmp_path / "train.jsonl")], "max_response_length": 4},
            "batch": {"prompts_per_step": 2, "samples_per_prompt": 2},
            "actor": {"model": {"hf_config": {"model_type": "qwen2"}}},
            "algorithm": {"kl": {"estimator": "k1", **kl}},
        },
    )


def compute_reward(ctx: NodeContext[NodeResources], inputs: dict[str, StepData]) -> StepData:
    out = _compute_reward(ctx, inputs)
    assert isinstance(out, StepData)  # a synchronous operation
    return out


def compute_advantage(ctx: NodeContext[NodeResources], inputs: dict[str, StepData]) -> StepData:
    out = _compute_advantage(ctx, inputs)
    assert isinstance(out, StepData)
    return out


def _context(config: RunConfig, operation: str, controller: KLController | None) -> NodeContext[NodeResources]:
    graph = get_pipeline("grpo", kl_in_reward=True)  # the pipeline an in-reward run runs
    node = next(n for n in graph.nodes.values() if n.operation == operation)
    resources = NodeResources(config, None, LengthTask(), None, None, None, kl_controller=controller)  # pyright: ignore[reportArgumentType]
    return NodeContext(node, 0, DataParallelInfo(0, 1), 0, resources)


def _scored_batch(config: RunConfig) -> StepData:
    """The four samples scored, with old and reference log-probs whose difference is `KL_ON_RESPONSE` on the
    response tokens and large off them (the penalty must ignore those)."""
    scored = compute_reward(_context(config, "compute_reward", None), {"r": _rollouts([1, 3, 2, 2], [0, 0, 1, 1])})
    mask = scored.batch["response_mask"].bool()
    old = torch.full(mask.shape, -7.0)
    ref = old - 5.0  # off the response: a KL of 5 that must not reach the rewards or the metric
    for row, values in enumerate(KL_ON_RESPONSE):
        ref[row, mask[row]] = old[row, mask[row]] - torch.tensor(values)
    # The rollout's log-probs (all 0 here) differ from the old ones: the penalty must read the old ones, as verl's.
    assert (scored.batch["rollout_log_probs"] == 0).all()
    return with_fields(scored, old_log_probs=old, ref_log_probs=ref)


def test_the_estimator_sees_the_scores_minus_beta_times_the_kl_per_token(tmp_path: Path) -> None:
    config = _config(tmp_path, {"mode": "in_reward", "coef": BETA})
    controller = FixedKLController(BETA)
    out = compute_advantage(_context(config, "compute_advantage", controller), {"ref": _scored_batch(config)})

    torch.testing.assert_close(out.batch["token_level_rewards"], torch.tensor(EXPECTED_REWARDS), atol=1e-6, rtol=0)
    assert out.batch["advantages"][:, 2].tolist() == pytest.approx(EXPECTED_ADVANTAGES, abs=1e-4)
    assert out.metrics["actor/reward_kl_penalty"] == pytest.approx(EXPECTED_KL, abs=1e-6)
    assert out.metrics["actor/reward_kl_penalty_coeff"] == BETA
    assert controller.value == BETA


@pytest.mark.parametrize(
    ("target", "expected_coef"),
    [
        # KL 0.19167 / target 0.1 - 1 = 0.917, clipped to 0.2: 0.5 x (1 + 0.2 x 4 / 100).
        (0.1, BETA * (1 + 0.2 * 4 / 100)),
        # KL 0.19167 / target 0.2 - 1 = -0.04167, inside the clip: 0.5 x (1 - 0.04167 x 4 / 100).
        (0.2, BETA * (1 + (EXPECTED_KL / 0.2 - 1) * 4 / 100)),
    ],
)
def test_the_adaptive_controller_steps_once_per_batch_and_the_next_step_logs_its_coefficient(
    tmp_path: Path, target: float, expected_coef: float
) -> None:
    config = _config(tmp_path, {"mode": "in_reward", "coef": BETA, "target": target, "horizon": 100})
    controller = AdaptiveKLController(BETA, target, 100)
    ctx = _context(config, "compute_advantage", controller)
    first = compute_advantage(ctx, {"ref": _scored_batch(config)})
    assert first.metrics["actor/reward_kl_penalty_coeff"] == BETA  # the coefficient the penalty used
    assert controller.value == pytest.approx(expected_coef, rel=1e-6)  # the KL is a float32 mean

    second = compute_advantage(ctx, {"ref": _scored_batch(config)})
    assert second.metrics["actor/reward_kl_penalty_coeff"] == pytest.approx(
        expected_coef, rel=1e-6
    )  # the KL is a float32 mean
    expected = [[score - expected_coef / BETA * (score - penalised) for score, penalised in zip(s, p, strict=True)]
                for s, p in zip(_scores(), EXPECTED_REWARDS, strict=True)]  # fmt: skip
    torch.testing.assert_close(second.batch["token_level_rewards"], torch.tensor(expected), atol=1e-6, rtol=0)


def _scores() -> list[list[float]]:
    """LengthTask's scores of the batch: each response's length on its last token."""
    return [[0, 0, 1, 0, 0], [0, 0, 0, 0, 3], [0, 0, 0, 2, 0], [0, 0, 0, 2, 0]]


TWO_RANKS = """
import json, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from rl_runtime.nodes._kl_reward import step_kl

def run(rank, port, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    if rank == 0:  # three samples: token-mean KL 0.1 (2 tokens), 0.3 (1 token), and one with no response token
        kl = torch.tensor([[0.05, 0.15, 0.0], [0.0, 0.3, 0.0], [0.0, 0.0, 0.0]])
        mask = torch.tensor([[1, 1, 0], [0, 1, 0], [0, 0, 0]])
    else:  # one sample of token-mean KL 0.6
        kl, mask = torch.tensor([[0.6, 0.6, 0.6]]), torch.ones(1, 3)
    with open(f"{out}.{rank}", "w") as f:
        json.dump(step_kl(kl, mask, dist.group.WORLD), f)
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(run, args=(int(sys.argv[1]), sys.argv[2]), nprocs=2)
"""


def test_every_rank_steps_its_controller_on_the_whole_steps_kl_and_samples(tmp_path: Path) -> None:
    import json
    import socket
    import subprocess
    import sys

    script = tmp_path / "two_ranks.py"
    script.write_text(TWO_RANKS)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "result"
    done = subprocess.run(
        [sys.executable, str(script), str(port), str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in (0, 1)]
    # The mean over the 3 samples with a response token, of each one's token-mean KL; 4 samples in all.
    assert results[0] == results[1]
    assert results[0][0] == pytest.approx((0.1 + 0.3 + 0.6) / 3, rel=1e-6)  # float32 inputs
    assert results[0][1] == 4


def test_one_rank_alone_reports_the_penalty_functions_metric() -> None:
    kl = torch.tensor([[0.05, 0.15, 0.0], [0.0, 0.3, 0.0], [0.0, 0.0, 0.0]])
    assert step_kl(kl, torch.tensor([[1, 1, 0], [0, 1, 0], [0, 0, 0]]), None) == pytest.approx((0.2, 3))
