"""The weight-free embedders: shapes, empty videos, determinism, frame sampling and the registry checks."""

from __future__ import annotations

import pytest
import torch

from rl_core.envs import (
    STATE_INPUT,
    EmbedderConfig,
    EnvConfigError,
    PixelPyramidEmbedder,
    PrivilegedStateEmbedder,
    embedder_input_kind,
    make_video_embedder,
    sample_frame_indices,
)
from rl_core.testing import toy_spec


def _video(t: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (t, 3, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def test_frame_indices_span_the_video_and_repeat_short_ones() -> None:
    assert sample_frame_indices(100, 4).tolist() == [0, 33, 66, 99]
    assert sample_frame_indices(2, 4).tolist() == [0, 0, 1, 1]
    assert sample_frame_indices(1, 3).tolist() == [0, 0, 0]


def test_pixel_pyramid_shapes_and_empty_video() -> None:
    emb = PixelPyramidEmbedder(num_frames=4, pool=7)
    assert emb.dim == 5 * 3 * 49
    out = emb.embed([_video(9), _video(0), _video(1)])
    assert out.shape == (3, emb.dim) and out.dtype == torch.float32
    assert torch.equal(out[1], torch.zeros(emb.dim))
    assert out[0].abs().sum() > 0 and out[2].abs().sum() > 0
    assert torch.equal(emb.embed([_video(9)])[0], out[0])  # deterministic, batch-independent


def test_pixel_pyramid_weights_the_last_frame() -> None:
    base = _video(8)
    changed_last, changed_mid = base.clone(), base.clone()
    changed_last[-1] = 255 - changed_last[-1]
    changed_mid[3] = 255 - changed_mid[3]  # not among the linspace picks of 2 frames
    emb = PixelPyramidEmbedder(num_frames=2, last_frame_weight=3.0)
    ref = emb.embed([base])[0]
    assert torch.equal(emb.embed([changed_mid])[0], ref)
    assert (emb.embed([changed_last])[0] - ref).norm() > 3.0 * (
        PixelPyramidEmbedder(num_frames=2, last_frame_weight=0.0).embed([changed_last])[0]
        - PixelPyramidEmbedder(num_frames=2, last_frame_weight=0.0).embed([base])[0]
    ).norm() / 2


def test_pixel_pyramid_refuses_wrong_channels() -> None:
    with pytest.raises(EnvConfigError, match=r"embedder\.options\.channels"):
        PixelPyramidEmbedder(channels=1).embed([_video(2)])


def test_privileged_state_embeds_the_last_state() -> None:
    emb = PrivilegedStateEmbedder(2)
    assert embedder_input_kind(emb) == STATE_INPUT
    out = emb.embed([torch.tensor([[0.0, 1.0], [2.0, 3.0]]), torch.zeros(0, 2)])
    assert out.tolist() == [[2.0, 3.0], [0.0, 0.0]]
    with pytest.raises(EnvConfigError, match=r"embedder\.dim"):
        emb.embed([torch.zeros(3, 5)])


def test_registry_builds_and_checks_the_embedders() -> None:
    spec = toy_spec()
    emb = make_video_embedder(EmbedderConfig(name="pixel_pyramid", num_frames=2, options={"pool": 2}), spec)
    assert emb.dim == 3 * 3 * 4
    with pytest.raises(EnvConfigError, match=r"embedder.dim: expected 10"):
        make_video_embedder(EmbedderConfig(name="pixel_pyramid", dim=10), spec)
    with pytest.raises(EnvConfigError, match=r"unknown pixel_pyramid option\(s\) \['poll'\]"):
        make_video_embedder(EmbedderConfig(options={"poll": 2}))
    oracle = make_video_embedder(EmbedderConfig(name="privileged_state", dim=2), spec)
    assert oracle.dim == 2
    with pytest.raises(EnvConfigError, match=r"set embedder\.dim"):
        make_video_embedder(EmbedderConfig(name="privileged_state"))
