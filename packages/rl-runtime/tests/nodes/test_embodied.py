"""The embodied operations against test doubles (toy env, random policy): rollout shapes and finish-step masks,
the accuracy band, SRPO rewards at the last valid token, and GRPO advantages under the masks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from rl_coordinator.loading import ShardedLoader, open_source
from rl_core.envs import EnvConfig, make_env, make_video_embedder
from rl_core.graph import get_pipeline
from rl_runtime.config import ConfigError, RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources
from rl_runtime.nodes._advantage import compute_advantage
from rl_runtime.nodes._embodied import embodied_reward, embodied_rollout, embodied_sampling
from rl_runtime.nodes._embodied_batch import EMBEDDING_KEY, SUCCESS_KEY, TASK_ID_KEY, valid_token_mask
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.testing import LAST_FRAME, TOY_ENV, RandomPolicy, WordTask, register_embodied_doubles
from rl_runtime.workers import NodeContext, NodeOperation, StepData, StepDataError

CHUNK = 2
register_embodied_doubles()


def _call(operation: NodeOperation, ctx: NodeContext[NodeResources], inputs: dict[str, StepData]) -> StepData:
    """Run a sync or async operation as the executor does."""
    out = operation(ctx, inputs)
    if isinstance(out, StepData):
        return out

    async def wait() -> StepData:
        return await out

    return asyncio.run(wait())


def _data(tmp_path: Path, rows: int = 4) -> Path:
    path = tmp_path / "trials.jsonl"
    path.write_text("".join(json.dumps({"task_id": i % 2, "trial_id": i % 3}) + "\n" for i in range(rows)))
    return path


def embodied_config(tmp_path: Path, overrides: list[str] | None = None, **sections: Any) -> RunConfig:
    data = {
        "data": {"train_files": [str(_data(tmp_path))], "max_response_length": 64},
        "batch": {"prompts_per_step": 2, "samples_per_prompt": 4},
        "actor": {"model": {"hf_config": {"model_type": "qwen2"}}},
        "algorithm": {"kl": {"mode": "none"}, "reward": "srpo", "embodied_sampling": {}},
        "env": {"name": TOY_ENV, "num_envs": 4, "max_steps": 5, "num_trials": 3},
        "embedder": {"name": LAST_FRAME},
        "pipeline": "embodied_srpo",
        **sections,
    }
    return config_from_dict(RunConfig, data, overrides or [])


def _context(config: RunConfig, operation: str, **resources: Any) -> NodeContext[NodeResources]:
    node = next(n for n in get_pipeline("embodied_srpo").nodes.values() if n.operation == operation)
    fields: dict[str, Any] = {"prompts": None, "rollout": None, "actor": None, **resources}
    res = NodeResources(config, None, WordTask(), **fields)  # pyright: ignore[reportArgumentType]
    return NodeContext(node, 0, DataParallelInfo(0, 1), 0, res)


def _rollout(tmp_path: Path, overrides: list[str] | None = None) -> StepData:
    config = embodied_config(tmp_path, overrides)
    assert config.env is not None
    loader = ShardedLoader(
        open_source(config.data.train_files[0]), dp_rank=0, dp_size=1, batch_size=2, seed=0, shuffle=False
    )
    assert config.embedder is not None
    env = make_env(config.env)
    embedder = make_video_embedder(config.embedder, env.spec)
    ctx = _context(config, "embodied_rollout", env=env, embedder=embedder, prompts=loader, rollout=RandomPolicy(CHUNK))
    return _call(embodied_rollout, ctx, {})


def test_rollout_groups_episodes_by_prompt_and_masks_the_unexecuted_tail(tmp_path: Path) -> None:
    out = _rollout(tmp_path)
    batch = out.batch
    size, steps = batch["pixel_values"].shape[:2]
    assert size == 8 and batch["pixel_values"].shape[2:] == (3, 4, 8) and batch["pixel_values"].dtype == torch.uint8
    assert batch["action_tokens"].shape == (8, steps, CHUNK)
    assert batch["response_mask"].shape == batch["rollout_log_probs"].shape == (8, steps * CHUNK)
    # n = 4 episodes of each prompt, contiguous, one group each; rows task 0 trial 0, then task 1 trial 1.
    groups = batch["group_id"].tolist()
    assert groups[:4] == [groups[0]] * 4 and groups[4:] == [groups[4]] * 4 and groups[0] != groups[4]
    assert out.extras[TASK_ID_KEY] == [0] * 4 + [1] * 4
    finish = batch["finish_step"]
    assert (batch["response_mask"].sum(-1) == finish).all()  # D = 1: one token per env step
    assert batch["response_mask"].tolist() == valid_token_mask(finish, steps * CHUNK, 1).tolist()
    assert (batch["rollout_log_probs"][batch["response_mask"] == 0] == 0).all()
    # Episodes end at the goal or after max_steps=5 env steps: an odd finish leaves the chunk's 2nd token masked.
    success = torch.tensor(out.extras[SUCCESS_KEY])
    assert ((finish == 5) | success).all() and (finish <= 5).all()
    # The first frame is the reset frame: agent at 1 + trial % 6, goal at cell 0 (task 0) or 7 (task 1).
    first = batch["pixel_values"][:, 0]
    assert first[0, 0, 0].tolist() == [0, 255, 0, 0, 0, 0, 0, 0] and first[4, 0, 0].tolist() == [
        0,
        0,
        255,
        0,
        0,
        0,
        0,
        0,
    ]
    assert first[0, 1, 0].tolist() == [255, 0, 0, 0, 0, 0, 0, 0] and first[4, 1, 0].tolist() == [
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        255,
    ]
    assert out.metrics["rollout/success_rate"] == pytest.approx(float(success.double().mean()))
    assert len(out.extras[EMBEDDING_KEY]) == 8


def test_rollout_is_seeded_by_run_seed_and_step(tmp_path: Path) -> None:
    first, second = _rollout(tmp_path), _rollout(tmp_path)
    assert torch.equal(first.batch["action_tokens"], second.batch["action_tokens"])
    other = _rollout(tmp_path, ["trainer.seed=7"])
    assert not torch.equal(first.batch["action_tokens"], other.batch["action_tokens"])


def _episodes(success: list[bool], groups: list[int], tasks: list[int], embeddings: list[list[float]]) -> StepData:
    finish = torch.tensor([3] * len(success))
    batch = {"response_mask": valid_token_mask(finish, 8, 2), "group_id": torch.tensor(groups), "finish_step": finish}
    extras = {
        SUCCESS_KEY: success,
        "env_failed": [False] * len(success),
        "truncated": [not s for s in success],
        TASK_ID_KEY: tasks,
        EMBEDDING_KEY: [torch.tensor(e) for e in embeddings],
    }
    return StepData(batch, extras)


def test_sampling_keeps_only_mixed_groups(tmp_path: Path) -> None:
    data = _episodes(
        [True, True, False, False, True, False, False, True],
        [1, 1, 2, 2, 3, 3, 4, 4],
        [0] * 8,
        [[1.0]] * 8,
    )
    out = _call(embodied_sampling, _context(embodied_config(tmp_path), "embodied_sampling"), {"r": data})
    assert out.batch["group_id"].tolist() == [3, 3, 4, 4]
    assert out.metrics["embodied_sampling/kept_groups"] == 2.0
    assert out.metrics["embodied_sampling/kept_ratio"] == 0.5


def test_sampling_with_no_mixed_group_passes_the_batch_on(tmp_path: Path) -> None:
    data = _episodes([True, True, False, False], [1, 1, 2, 2], [0] * 4, [[1.0]] * 4)
    out = _call(embodied_sampling, _context(embodied_config(tmp_path), "embodied_sampling"), {"r": data})
    assert out.num_samples == 4 and out.metrics["embodied_sampling/kept_groups"] == 0.0


def test_srpo_rewards_sit_on_the_last_valid_token_and_order_failures_by_distance(tmp_path: Path) -> None:
    # Task 0: successes at the origin, failures at distance 1, 2, 4; task 1 has no success -> its failure gets 0.
    data = _episodes(
        [True, True, False, False, False, False],
        [1, 1, 1, 2, 2, 3],
        [0, 0, 0, 0, 0, 1],
        [[0.1, 0.0], [-0.1, 0.0], [1.0, 0.0], [2.0, 0.0], [4.0, 0.0], [1.0, 1.0]],
    )
    out = _call(embodied_reward, _context(embodied_config(tmp_path), "embodied_reward"), {"r": data})
    scores = out.batch["token_level_scores"]
    # finish_step 3, D = 2: tokens 0..5 valid, the reward on token 5 only.
    assert (scores[:, [0, 1, 2, 3, 4, 6, 7]] == 0).all()
    rewards = scores[:, 5].tolist()
    assert rewards[:2] == [1.0, 1.0] and rewards[5] == 0.0
    failures = rewards[2:5]
    assert all(0 < r < 0.6 for r in failures)
    assert failures[0] > failures[1] > failures[2]
    assert out.metrics["reward/shaped_failures"] == 3.0


def test_binary_reward_is_success(tmp_path: Path) -> None:
    config = embodied_config(tmp_path, ["algorithm.reward=binary"])
    data = _episodes([True, False], [1, 1], [0, 0], [[0.5], [1.0]])
    out = _call(embodied_reward, _context(config, "embodied_reward"), {"r": data})
    assert out.batch["token_level_scores"][:, 5].tolist() == [1.0, 0.0]


def test_grpo_advantages_cover_exactly_the_executed_action_tokens(tmp_path: Path) -> None:
    config = embodied_config(tmp_path)
    data = _episodes([True, False, True, False], [1, 1, 1, 1], [0] * 4, [[0.5], [1.5], [0.5], [3.5]])
    scored = _call(embodied_reward, _context(config, "embodied_reward"), {"r": data})
    out = _call(compute_advantage, _context(config, "compute_advantage"), {"r": scored})
    advantages, mask = out.batch["advantages"], out.batch["response_mask"].bool()
    assert (advantages[~mask] == 0).all()
    assert (advantages[0][mask[0]] > 0).all() and (advantages[1][mask[1]] < 0).all()
    # the nearer failure (distance 1) is ranked above the farther one (distance 3)
    assert advantages[1, 0] > advantages[3, 0]


def test_rollout_without_an_env_names_the_setting(tmp_path: Path) -> None:
    ctx = _context(embodied_config(tmp_path), "embodied_rollout")
    with pytest.raises(StepDataError, match=r"acts in an environment.*env section"):
        _call(embodied_rollout, ctx, {})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"env": None}, r"env: expected an env section: pipeline 'embodied_srpo' acts in an environment"),
        ({"embedder": None}, r"embedder: expected an embedder section: algorithm.reward=srpo"),
        ({"pipeline": "grpo"}, r"env: expected null: pipeline 'grpo' has no environment"),
        ({"env": {"name": "babyia"}}, r"env.name: expected a registered environment"),
        ({"embedder": {"name": "vjepa9"}}, r"embedder.name: expected a registered video embedder"),
        ({"placement": {"slots": 2, "colocate": False}}, None),  # split: the band runs on the training slot
        ({"rollout": {"engine": "hf", "temperature": 1.0, "top_k": 5}}, None),
    ],
)
def test_config_refuses_a_pipeline_and_env_that_disagree(
    tmp_path: Path, change: dict[str, Any], message: str | None
) -> None:
    if message is None:  # accepted
        embodied_config(tmp_path, **change)
        return
    with pytest.raises(ConfigError, match=message):
        embodied_config(tmp_path, **change)


def test_config_refuses_srpo_without_the_band_and_task_reward(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"algorithm.embodied_sampling: expected an embodied_sampling section"):
        embodied_config(tmp_path, algorithm={"kl": {"mode": "none"}, "reward": "srpo"})
    with pytest.raises(ConfigError, match=r"algorithm.reward: expected srpo or binary"):
        embodied_config(tmp_path, algorithm={"kl": {"mode": "none"}, "embodied_sampling": {}})


def test_env_config_is_the_components_own(tmp_path: Path) -> None:
    config = embodied_config(tmp_path)
    assert config.env == EnvConfig(name=TOY_ENV, num_envs=4, max_steps=5, num_trials=3)
