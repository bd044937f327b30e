"""Multi-turn workflows through the node operations with real tiny engines: trajectories become batch rows whose
tool tokens carry no loss, no advantage and no gradient."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rl_core.losses import LossNormalizer
from rl_core.schema import (
    ADVANTAGES,
    ATTENTION_MASK,
    INPUT_IDS,
    LOSS_MASK,
    OLD_LOG_PROBS,
    PROMPT_LEN,
    RESPONSE_LEN,
    RESPONSE_MASK,
    TOKEN_LEVEL_SCORES,
    TOKEN_POLICY_VERSION,
    TURN_ID,
    check_sample,
)
from rl_core.workflows import load_workflow
from rl_engines.training import ForwardOutput
from rl_runtime.nodes._advantage import compute_advantage
from rl_runtime.nodes._generate import generate
from rl_runtime.nodes._log_probs import compute_old_log_prob
from rl_runtime.nodes._reward import compute_reward
from rl_runtime.nodes._trajectory_batch import WORKFLOW_REWARD_KEY
from rl_runtime.workers import StepData, StepDataError

from .test_train import _config, _context, _resources

WORKFLOW_FILE = Path(__file__).with_name("multi_turn_workflow.py")
TOOL_IDS = (61, 62)


def _multi_turn_step(tmp_path: Path, own_reward: bool = True) -> StepData:
    resources = _resources(_config(tmp_path, recompute_old_log_prob="always"))
    resources.workflow = load_workflow(f"{WORKFLOW_FILE}:ToolEchoWorkflow", {"own_reward": own_reward})
    data = generate(_context(resources, "generate"), {})
    assert data.metrics["rollout/episodes_accepted"] + data.metrics["rollout/episodes_rejected"] == 8
    assert data.metrics["rollout/engine_calls"] == 2  # every episode's turn t shares one batched engine call
    metrics = dict(data.metrics)
    data = compute_reward(_context(resources, "compute_reward"), {"rollout": data})
    metrics.update(data.metrics)
    data = compute_advantage(_context(resources, "compute_advantage"), {"reward": data})
    old = compute_old_log_prob(_context(resources, "compute_old_log_prob"), {"advantage": data})
    return StepData({**old.batch, **data.batch}, data.extras, metrics)


def _tool_positions(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """`(B, T)` bool: the tool tokens of each row (after the prompt, real, not sampled by the model)."""
    columns = torch.arange(batch[INPUT_IDS].shape[1])
    after_prompt = columns >= batch[PROMPT_LEN][:, None]
    return after_prompt & batch[ATTENTION_MASK].bool() & ~batch[LOSS_MASK].bool()


def test_multi_turn_rows_mask_tool_tokens_out_of_the_loss_and_its_gradient(tmp_path: Path) -> None:
    data = _multi_turn_step(tmp_path)
    batch = dict(data.batch)
    check_sample(batch)
    tools = _tool_positions(batch)
    assert tools.sum() == 2 * batch[INPUT_IDS].shape[0]
    assert (batch[INPUT_IDS][tools].view(-1, 2) == torch.tensor(TOOL_IDS)).all()
    assert torch.equal(batch[RESPONSE_MASK], batch[LOSS_MASK])
    assert (batch[RESPONSE_LEN] == 6).all() and (batch[TURN_ID].amax(dim=1) == 2).all()
    assert (batch[TOKEN_POLICY_VERSION][tools] == -1).all() and (
        batch[TOKEN_POLICY_VERSION][batch[LOSS_MASK].bool()] == 0
    ).all()
    assert (batch[ADVANTAGES][tools] == 0).all() and (batch[TOKEN_LEVEL_SCORES][tools] == 0).all()
    assert batch[ADVANTAGES].abs().sum() > 0  # rewards varied within groups: there is a gradient to check

    resources = _resources(_config(tmp_path))
    normalizer = LossNormalizer.from_mask(batch[RESPONSE_MASK])

    def loss_of(log_probs: torch.Tensor) -> torch.Tensor:
        outputs = ForwardOutput(log_probs, torch.zeros_like(log_probs), None)
        return resources.actor.objective(outputs, batch, normalizer).loss

    log_probs = batch[OLD_LOG_PROBS].clone().requires_grad_(True)
    loss = loss_of(log_probs)
    loss.backward()
    assert log_probs.grad is not None
    assert (log_probs.grad[tools] == 0).all() and log_probs.grad[batch[LOSS_MASK].bool()].abs().sum() > 0
    moved = batch[OLD_LOG_PROBS].clone()
    moved[tools] -= 3.0  # a tool token's log-prob changes: no loss changes
    assert loss_of(moved).item() == loss.item()
    moved[batch[LOSS_MASK].bool()] -= 0.5  # a model token's does
    assert loss_of(moved).item() != loss.item()


def test_workflow_reward_replaces_the_task_score_only_where_given(tmp_path: Path) -> None:
    own = _multi_turn_step(tmp_path, own_reward=True)
    rewards = torch.tensor(own.extras[WORKFLOW_REWARD_KEY])
    torch.testing.assert_close(own.batch[TOKEN_LEVEL_SCORES].sum(dim=1), rewards)
    assert own.metrics["reward/workflow_scored_frac"] == 1.0
    task = _multi_turn_step(tmp_path, own_reward=False)
    assert task.extras[WORKFLOW_REWARD_KEY] == [None] * task.num_samples
    # The test task scores the whole response (tool tokens included) by its token-id sum mod 5.
    ids, prompt_lens = task.batch[INPUT_IDS], task.batch[PROMPT_LEN]
    expected = [float(int(ids[i, prompt_lens[i] :].sum()) % 5) for i in range(task.num_samples)]
    torch.testing.assert_close(task.batch[TOKEN_LEVEL_SCORES].sum(dim=1), torch.tensor(expected))


def test_every_episode_rejected_fails_the_draw_naming_the_cause(tmp_path: Path) -> None:
    resources = _resources(_config(tmp_path))
    resources.workflow = load_workflow(f"{WORKFLOW_FILE}:ToolEchoWorkflow", {"tool_ids": list(range(1, 6))})
    with pytest.raises(StepDataError, match=r"none of the 8 episodes gave a trajectory .*over_budget"):
        generate(_context(resources, "generate"), {})
