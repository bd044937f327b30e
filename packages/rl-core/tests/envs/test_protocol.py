"""The env seam's types, registries and argument checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
import torch

from rl_core import ShapeError, UnknownNameError
from rl_core.envs import (
    ENVIRONMENTS,
    VIDEO_EMBEDDERS,
    EmbedderConfig,
    EnvConfig,
    EnvConfigError,
    EnvObservation,
    EnvSpec,
    VectorEnv,
    VideoEmbedder,
    check_observation,
    check_reset_args,
    check_step_args,
    make_env,
    make_video_embedder,
)

SPEC = EnvSpec("toy", (3, 8, 8), action_dims=2, action_bins=5, max_steps=10, task_names=("a", "b"), num_trials=4)


class _ConstEmbedder:
    """Test double: claims `claimed` dims, outputs `actual`."""

    def __init__(self, claimed: int, actual: int) -> None:
        self._claimed, self._actual = claimed, actual

    @property
    def dim(self) -> int:
        return self._claimed

    def embed(self, videos: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.zeros(len(videos), self._actual)


def test_observation_carries_contract_shapes() -> None:
    n = 3
    obs = EnvObservation(
        indices=(0, 1, 2),
        frames=torch.zeros(n, *SPEC.image_shape, dtype=torch.uint8),
        instructions=("a",) * n,
        active=torch.ones(n, dtype=torch.bool),
        complete=torch.zeros(n, dtype=torch.bool),
        finish_step=torch.zeros(n, dtype=torch.int64),
        failed=torch.zeros(n, dtype=torch.bool),
        video=tuple(torch.zeros(1, *SPEC.image_shape, dtype=torch.uint8) for _ in range(n)),
    )
    assert obs.frames.shape == (n, 3, 8, 8)
    assert obs.state is None
    assert len(obs.video) == n
    check_observation(obs, SPEC, [0, 1, 2])
    with pytest.raises(ShapeError, match=r"EnvObservation\.indices"):
        check_observation(obs, SPEC, [2, 1, 0])
    with pytest.raises(ShapeError, match=r"EnvObservation\.frames: expected \(3, 3, 8, 8\) uint8"):
        check_observation(dataclasses.replace(obs, frames=obs.frames.float()), SPEC, [0, 1, 2])
    with pytest.raises(ShapeError, match=r"EnvObservation\.finish_step: expected values in \[0, 10\]"):
        check_observation(dataclasses.replace(obs, finish_step=torch.full((n,), 11)), SPEC, [0, 1, 2])
    with pytest.raises(ShapeError, match=r"EnvObservation\.video\[1\]"):
        bad_video = (obs.video[0], torch.zeros(1, 3, 8, 9, dtype=torch.uint8), obs.video[2])
        check_observation(dataclasses.replace(obs, video=bad_video), SPEC, [0, 1, 2])


def test_reset_args_are_checked() -> None:
    check_reset_args(SPEC, 4, [0, 1], [3, 0])
    with pytest.raises(EnvConfigError, match="task_id 2 out of range"):
        check_reset_args(SPEC, 4, [2], [0])
    with pytest.raises(EnvConfigError, match=r"trial_id 4 out of range.*env.num_trials"):
        check_reset_args(SPEC, 4, [0], [4])
    with pytest.raises(EnvConfigError, match=r"env\.num_envs"):
        check_reset_args(SPEC, 1, [0, 0], [0, 0])
    with pytest.raises(EnvConfigError, match="one trial per task"):
        check_reset_args(SPEC, 4, [0, 0], [0])


def test_step_args_are_checked() -> None:
    check_step_args(SPEC, 4, [1, 3], torch.zeros(2, 3, 2, dtype=torch.int64))
    with pytest.raises(EnvConfigError, match="D=2"):
        check_step_args(SPEC, 4, [1], torch.zeros(1, 3, 1, dtype=torch.int64))
    with pytest.raises(EnvConfigError, match=r"\[0, 5\)"):
        check_step_args(SPEC, 4, [1], torch.full((1, 3, 2), 5, dtype=torch.int64))
    with pytest.raises(EnvConfigError, match="int64"):
        check_step_args(SPEC, 4, [1], torch.zeros(1, 3, 2))
    with pytest.raises(EnvConfigError, match="distinct env slots"):
        check_step_args(SPEC, 4, [1, 1], torch.zeros(2, 3, 2, dtype=torch.int64))


def test_unknown_env_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="unknown environment 'nope'"):
        make_env(EnvConfig(name="nope"))
    with pytest.raises(EnvConfigError, match=r"env\.num_envs"):
        make_env(EnvConfig(name="nope", num_envs=0))


def test_embedder_dim_mismatch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(VIDEO_EMBEDDERS, "liar", lambda config: _ConstEmbedder(4, 5))
    monkeypatch.setitem(VIDEO_EMBEDDERS, "honest", lambda config: _ConstEmbedder(4, 4))
    with pytest.raises(EnvConfigError, match=r"embedder.dim: expected 8.*produces 4"):
        make_video_embedder(EmbedderConfig(name="honest", dim=8))
    with pytest.raises(EnvConfigError, match=r"expected \(1, 4\)"):
        make_video_embedder(EmbedderConfig(name="liar"), SPEC)
    embedder = make_video_embedder(EmbedderConfig(name="honest", dim=4), SPEC)
    assert isinstance(embedder, VideoEmbedder)
    assert "liar" not in ENVIRONMENTS
    assert not isinstance(embedder, VectorEnv)
