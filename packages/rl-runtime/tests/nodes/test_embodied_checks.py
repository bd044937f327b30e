"""The driver's embodied checks before any worker starts, and validation by episodes (test doubles)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from rl_coordinator.loading import open_source
from rl_core.envs import make_env
from rl_core.testing import TOY_TASKS
from rl_engines.vla import OpenVLASpec
from rl_runtime.evaluation._evaluate import reduce_validation
from rl_runtime.nodes import NodeResources
from rl_runtime.testing import RandomPolicy, WordTask
from rl_runtime.trainer._embodied import check_embodied_run, evaluate_episodes
from rl_runtime.trainer._errors import TrainerError

from .test_embodied import embodied_config


def _vla(**changes: object) -> SimpleNamespace:
    return SimpleNamespace(**{"action_bins": 3, "action_dims": 1, "image_shape": [3, 4, 8], **changes})


def test_a_matching_policy_passes_and_returns_the_env_spec(tmp_path: Path) -> None:
    spec = check_embodied_run(embodied_config(tmp_path), _vla())
    assert spec is not None and spec.action_bins == 3 and spec.task_names == TOY_TASKS


def test_an_unknown_task_is_refused_before_any_worker(tmp_path: Path) -> None:
    config = embodied_config(tmp_path, ["env.tasks=[reach 9]"])
    with pytest.raises(TrainerError, match=r"env: env.tasks: the toy env has exactly the tasks .*, got \['reach 9'\]"):
        check_embodied_run(config, _vla())


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (_vla(action_bins=256), r"actor.model: the VLA's action_bins=256 does not match env 'toy'"),
        (_vla(image_shape=[3, 8, 8]), r"the VLA's image_shape=\[3, 8, 8\] does not match .* image_shape=\(3, 4, 8\)"),
        (SimpleNamespace(model_type="qwen2"), r"actor.model: an embodied run needs a VLA policy"),
    ],
)
def test_a_policy_that_disagrees_with_the_env_is_refused(tmp_path: Path, policy: object, message: str) -> None:
    with pytest.raises(TrainerError, match=message):
        check_embodied_run(embodied_config(tmp_path), policy)


def _openvla(**changes: object) -> OpenVLASpec:
    """An OpenVLA-OFT checkpoint's spec (as `actor_hf_config` reads it from the folder) with the toy env's action
    space, at its own 28x28 backbone input."""
    fields: dict[str, object] = {
        "path": "/checkpoints/openvla",
        "chunk_size": 4,
        "action_dims": 1,
        "action_bins": 3,
        "vocab_size": 320,
        "num_patches": 4,
        "input_sizes": ((3, 28, 28),),
        "means": ((0.5, 0.5, 0.5),),
        "stds": ((0.5, 0.5, 0.5),),
        "stop_token_id": 2,
        "unnorm_key": "toy",
        "q01": (-1.0,),
        "q99": (1.0,),
        "mask": (True,),
        "center_crop": False,
        **changes,
    }
    return OpenVLASpec(**fields)  # pyright: ignore[reportArgumentType]


def test_an_openvla_actor_matching_the_env_passes_whatever_its_frame_size(tmp_path: Path) -> None:
    spec = check_embodied_run(embodied_config(tmp_path), _openvla())  # frames are resized to the backbones' input
    assert spec is not None and (spec.action_dims, spec.action_bins) == (1, 3)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"action_bins": 256}, r"actor.model: the VLA's action_bins=256 does not match env 'toy'.*rl_vla.json"),
        ({"action_dims": 7}, r"actor.model: the VLA's action_dims=7 does not match env 'toy'.*action_dims=1"),
    ],
)
def test_an_openvla_actor_that_disagrees_with_the_env_is_refused(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(TrainerError, match=message):
        check_embodied_run(embodied_config(tmp_path), _openvla(**changes))


def test_an_embedder_whose_dim_disagrees_is_refused(tmp_path: Path) -> None:
    config = embodied_config(tmp_path, ["embedder.dim=5"])
    with pytest.raises(TrainerError, match=r"embedder: embedder.dim: expected 5"):
        check_embodied_run(config, _vla())


def test_validation_counts_successes_per_task(tmp_path: Path) -> None:
    config = embodied_config(tmp_path, ["rollout.val_temperature=1.0", "rollout.val_samples_per_prompt=2"])
    assert config.env is not None
    resources = NodeResources(
        config,
        None,
        WordTask(),
        None,
        RandomPolicy(),
        None,
        env=make_env(config.env),  # pyright: ignore[reportArgumentType]
    )
    source = open_source(config.data.train_files[0])
    ranks = [evaluate_episodes(resources, source, rank, 2) for rank in (0, 1)]
    assert [(sums["num_prompts"], sums["num_samples"]) for sums in ranks] == [(2.0, 4.0), (2.0, 4.0)]
    metrics = reduce_validation(ranks, 2)
    episodes = {task: sum(r.get(f"task_{task}/episodes", 0.0) for r in ranks) for task in (0, 1)}
    wins = {task: sum(r.get(f"task_{task}/successes", 0.0) for r in ranks) for task in (0, 1)}
    assert episodes == {0: 4.0, 1: 4.0}
    assert metrics["val/success_rate/task_0"] == wins[0] / 4 and metrics["val/success_rate/task_1"] == wins[1] / 4
    assert metrics["val/reward/mean@2"] == (wins[0] + wins[1]) / 8
