"""`embodied_srpo` through the Trainer with an OpenVLA-OFT actor, colocated and in split placement (rollout and
training on a slot each): two steps on the OpenVLA-OFT TEST DOUBLE checkpoint (rl-engines' `_fake_openvla`: tiny,
random, not OpenVLA) against the LIBERO adapter over a scripted fake simulator (`_fake_libero`; 7 action dims, 256
bins): the instructions are encoded with OpenVLA's prompt by the recipe's own task, the actor's weights change and
the rollout policy receives them (checksum-verified sync; in split placement over the weight link, step 2 sampled
with step 1's weights), the metrics are finite."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import ray.cloudpickle
import torch

import rl_core.envs
from rl_core.envs import EnvConfig, VectorEnv
from rl_engines.vla import OpenVLAPrompt, VLAPolicy, read_openvla_spec
from rl_recipes.embodied import EmbodiedTask, EmbodiedTaskFactory
from rl_recipes.environments import libero_vector_env
from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes._train import checksum_metric
from rl_runtime.trainer import Trainer

_VLA_TESTS = Path(__file__).resolve().parents[3] / "rl-engines" / "tests" / "vla"
_ENV_TESTS = Path(__file__).resolve().parents[1] / "environments"
for _doubles in (_VLA_TESTS, _ENV_TESTS):  # rl-engines' test-double checkpoint, our LIBERO double: shared, not copied
    if str(_doubles) not in sys.path:
        sys.path.insert(0, str(_doubles))
import _fake_libero  # noqa: E402
from _fake_libero import SUITE, fake_libero_api  # noqa: E402
from _fake_openvla import write_fake_openvla  # noqa: E402

# Ray workers cannot import test modules: ship this one's task factory and the LIBERO double by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(_fake_libero)

pytestmark = pytest.mark.slow
FAKE_LIBERO = "libero_scripted_double"
"""The LIBERO adapter over `_fake_libero`'s simulator, registered under this name in the driver and in every worker."""
PLACEMENTS: dict[str, Mapping[str, Any]] = {
    "colocated": {"slots": 1, "colocate": True},
    "split": {"slots": 2, "colocate": False},
}
"""Both placements the config accepts for an OpenVLA actor: one slot doing everything, or rollout and training on
a slot each (the actor's weights sent to the rollout slot over the weight link after every update)."""
SUCCESS_X = 0.5
"""Where the scripted simulator succeeds in this test (the double's default is 1.0)."""


def _make_fake_libero(config: EnvConfig) -> VectorEnv:
    return libero_vector_env(config, functools.partial(fake_libero_api, success_x=SUCCESS_X))


def _register_fake_libero() -> None:
    # Through the module: a by-value function would carry copies of the registry dict it names directly.
    if FAKE_LIBERO not in rl_core.envs.ENVIRONMENTS:
        rl_core.envs.register_environment(FAKE_LIBERO)(_make_fake_libero)


def _task_factory_in_worker(model_dir: str) -> _DoublesTaskFactory:
    _register_fake_libero()  # unpickled in a worker before it builds its env
    return _DoublesTaskFactory(model_dir)


@attrs.frozen
class _DoublesTaskFactory:
    """The recipe's `EmbodiedTaskFactory`, plus the fake env's registration wherever it is unpickled."""

    model_dir: str

    def __call__(self) -> EmbodiedTask:
        return EmbodiedTaskFactory(self.model_dir)()

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_task_factory_in_worker, (self.model_dir,))


def _config(tmp_path: Path, checkpoint: Path, placement: Mapping[str, Any]) -> RunConfig:
    rows = tmp_path / "trials.jsonl"
    rows.write_text("".join(json.dumps({"task_id": t, "trial_id": k}) + "\n" for t in (0, 1) for k in (0, 1)))
    (tmp_path / "assets").mkdir()
    low, high = read_openvla_spec(checkpoint).env_action_bounds()  # the checkpoint's q01/q99, as docs/openvla-oft.md
    data = {
        "pipeline": "embodied_srpo",
        "data": {"train_files": [str(rows)], "max_prompt_length": 32, "max_response_length": 56},
        "batch": {"prompts_per_step": 2, "samples_per_prompt": 4},
        "env": {
            "name": FAKE_LIBERO,
            "tasks": [SUITE],
            "num_envs": 8,
            "max_steps": 8,
            "num_trials": 4,
            "num_workers": 0,
            "options": {
                "assets_dir": str(tmp_path / "assets"),
                "image_size": 16,
                "num_steps_wait": 0,
                "action_low": low,
                "action_high": high,
            },
        },
        "embedder": {"name": "pixel_pyramid"},
        "algorithm": {
            "adv_estimator": "grpo",
            "kl": {"mode": "none", "coef": 0.0},
            "reward": "srpo",
            "entropy_coef": 0.01,  # with the full band: an update even in a step whose groups all fail or all succeed
            "embodied_sampling": {"lower": 0.0, "upper": 1.0},
        },
        "actor": {
            "model": {"path": str(checkpoint)},
            "optimizer": {"lr": 1.0e-3, "weight_decay": 0.0},
            "precision": {"param_dtype": "float32"},
        },
        "rollout": {"temperature": 1.0},
        "placement": {"device": "cpu", **placement},
        "trainer": {
            "total_steps": 2,
            "validate_every": 0,
            "checkpoint_every": 0,
            "log_sinks": ["jsonl"],
            "output_dir": str(tmp_path / "run"),
            "seed": 0,
        },
    }
    return config_from_dict(RunConfig, data, [])


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
def test_two_embodied_srpo_steps_train_an_openvla_actor(tmp_path: Path, ray_cluster: None, placement: str) -> None:
    checkpoint = write_fake_openvla(tmp_path / "openvla_double")
    _register_fake_libero()
    task = EmbodiedTaskFactory(str(checkpoint))()
    instruction = "Put the bowl on the plate"
    assert task.encode_instruction(instruction) == OpenVLAPrompt(checkpoint).encode(instruction)
    initial = checksum_metric(VLAPolicy.from_pretrained(checkpoint, dtype=torch.float32).weights_checksum())

    config = _config(tmp_path, checkpoint, PLACEMENTS[placement])
    result = Trainer(config, _DoublesTaskFactory(str(checkpoint))).fit()

    assert [result.start_step, result.end_step, len(result.history)] == [0, 2, 2]
    checksums = [initial]
    for metrics in result.history:
        assert metrics["sync/num_tensors"] > 0  # the rollout policy got the updated weights, checksum-verified
        assert metrics["actor/grad_norm"] > 0
        assert 0.0 <= metrics["rollout/success_rate"] <= 1.0 and metrics["rollout/finish_step_mean"] > 0
        assert all(math.isfinite(value) for value in metrics.values()), metrics
        checksums.append(metrics["sync/weights_checksum"])
    assert len(set(checksums)) == 3  # each step's update changed the weights the policy received
    if placement == "split":  # the rollout slot sampled step 2 with step 1's update, sent over the weight link
        assert [m["rollout/policy_version"] for m in result.history] == [0.0, 1.0]
        assert all(m["rollout/weights_checksum"] == m["sync/weights_checksum"] for m in result.history)
    # SRPO's progress rewards for failures and GRPO advantages reached the update, not only the entropy bonus.
    assert any(m["reward/shaped_failures"] > 0 and m["critic/advantages/max"] > 0 for m in result.history)
