"""The V-JEPA 2 embedder's code path, with a tiny random config saved to a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rl_core.envs import EmbedderConfig, EnvConfigError, EnvSpec, make_video_embedder
from rl_engines.embedders import VJEPA2Embedder

SPEC = EnvSpec("toy", (3, 20, 24), action_dims=1, action_bins=3, max_steps=8, task_names=("a",), num_trials=1)


@pytest.fixture(scope="module")
def tiny_vjepa2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import VJEPA2Config, VJEPA2Model

    torch.manual_seed(0)
    config = VJEPA2Config(
        crop_size=32,
        frames_per_clip=4,
        tubelet_size=2,
        patch_size=16,
        hidden_size=48,
        num_hidden_layers=1,
        num_attention_heads=2,
        mlp_ratio=2.0,
        pred_hidden_size=24,
        pred_num_hidden_layers=1,
        pred_num_attention_heads=2,
        pred_num_mask_tokens=2,
    )
    path = tmp_path_factory.mktemp("vjepa2")
    VJEPA2Model(config).save_pretrained(path)
    return path


def test_embeds_videos_from_a_local_folder(tiny_vjepa2: Path) -> None:
    embedder = make_video_embedder(EmbedderConfig(name="vjepa2", path=str(tiny_vjepa2), num_frames=3, dim=48), SPEC)
    assert isinstance(embedder, VJEPA2Embedder) and embedder.dim == 48
    gen = torch.Generator().manual_seed(0)
    videos = [torch.randint(0, 256, (t, *SPEC.image_shape), dtype=torch.uint8, generator=gen) for t in (5, 0, 1)]
    out = embedder.embed(videos)
    assert out.shape == (3, 48) and out.dtype == torch.float32
    assert torch.equal(out[1], torch.zeros(48))
    assert torch.isfinite(out).all() and out[0].abs().sum() > 0
    assert torch.allclose(embedder.embed(videos[:1])[0], out[0], atol=1e-5)  # batch-independent


def test_bad_path_and_dim_are_refused(tiny_vjepa2: Path, tmp_path: Path) -> None:
    with pytest.raises(EnvConfigError, match=r"embedder\.path: vjepa2 needs a local folder"):
        make_video_embedder(EmbedderConfig(name="vjepa2", path=str(tmp_path / "missing")))
    with pytest.raises(EnvConfigError, match=r"embedder\.dim: expected 64.*produces 48"):
        make_video_embedder(EmbedderConfig(name="vjepa2", path=str(tiny_vjepa2), dim=64))
