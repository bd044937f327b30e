"""The weight-free video embedders: the pixel pyramid (default) and the privileged-state oracle."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from rl_core.envs._protocols import STATE_INPUT
from rl_core.envs._registry import register_video_embedder
from rl_core.envs._types import EmbedderConfig, EnvConfigError


def sample_frame_indices(length: int, num_frames: int) -> torch.Tensor:
    """`num_frames` indices into a video of `length` frames by linspace (siiRL's sampling; short videos repeat)."""
    return torch.linspace(0, length - 1, num_frames).round().long()


class PixelPyramidEmbedder:
    """Weight-free embedding of raw pixels: K frames picked by linspace, each average-pooled to `pool` x `pool`,
    concatenated, plus the last frame pooled again and multiplied by `last_frame_weight` (the end state carries
    most of the progress). dim = (K + 1) * channels * pool * pool (1323 for 8 RGB frames at 7x7).

    This is the raw-pixel baseline that the SRPO paper argues against: distances between pooled pixels follow
    appearance (colours, layout, camera), not task progress, and are not robust to visual change. It is the default
    only because it needs no weights and works offline; use a world-model embedder ("vjepa2") where weights exist.
    """

    input_kind = "frames"

    def __init__(self, num_frames: int = 8, pool: int = 7, channels: int = 3, last_frame_weight: float = 3.0) -> None:
        if num_frames < 1 or pool < 1 or channels < 1:
            raise EnvConfigError(
                f"pixel_pyramid: num_frames, pool and channels must be >= 1, got {num_frames}, {pool}, {channels}; "
                "fix embedder.num_frames / embedder.options"
            )
        self._k, self._pool, self._channels, self._w = num_frames, pool, channels, last_frame_weight

    @property
    def dim(self) -> int:
        """Embedding size: (K + 1) * channels * pool * pool."""
        return (self._k + 1) * self._channels * self._pool * self._pool

    def embed(self, videos: Sequence[torch.Tensor]) -> torch.Tensor:
        """Embed B videos, each (T_i, C, H, W) uint8 -> (B, dim) float32; an empty video gives zeros."""
        out = torch.zeros(len(videos), self.dim)
        for b, video in enumerate(videos):
            if video.shape[0] == 0:
                continue
            if video.dim() != 4 or video.shape[1] != self._channels:
                raise EnvConfigError(
                    f"pixel_pyramid: video {b} must be (T, {self._channels}, H, W), got {tuple(video.shape)}; "
                    "set embedder.options.channels to the env's frame channels"
                )
            frames = video[sample_frame_indices(video.shape[0], self._k)].float() / 255.0
            pooled = F.adaptive_avg_pool2d(frames, self._pool).flatten(1)  # (K, C*p*p)
            out[b] = torch.cat([pooled.flatten(), pooled[-1] * self._w])
        return out


class PrivilegedStateEmbedder:
    """Oracle ablation: embeds an episode by the env's privileged state features at its last step.

    Its "videos" are (T_i, Z) float32 state trajectories (`input_kind = STATE_INPUT`), e.g. the `state` of each
    `EnvObservation` stacked over an episode. Not available to a real robot; use it to bound what a perfect progress
    embedding would give.
    """

    input_kind = STATE_INPUT

    def __init__(self, state_dim: int) -> None:
        if state_dim < 1:
            raise EnvConfigError(
                f"privileged_state: embedder.dim must be the env's state size (>= 1), got {state_dim}; "
                "set embedder.dim (BabyAI: 3)"
            )
        self._dim = state_dim

    @property
    def dim(self) -> int:
        """The env's state size Z."""
        return self._dim

    def embed(self, videos: Sequence[torch.Tensor]) -> torch.Tensor:
        """Embed B state trajectories (T_i, Z) -> (B, Z) float32: the last state; an empty trajectory gives zeros."""
        out = torch.zeros(len(videos), self._dim)
        for b, states in enumerate(videos):
            if states.shape[0] == 0:
                continue
            if states.dim() != 2 or states.shape[1] != self._dim:
                raise EnvConfigError(
                    f"privileged_state: trajectory {b} must be (T, {self._dim}) states, got {tuple(states.shape)}; "
                    "set embedder.dim to the env's state size"
                )
            out[b] = states[-1].float()
        return out


def _option(config: EmbedderConfig, name: str, default: float) -> float:
    value = config.options.get(name, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise EnvConfigError(f"embedder.options.{name}: expected a number, got {value!r}; set a number")
    return float(value)


@register_video_embedder("pixel_pyramid")
def make_pixel_pyramid(config: EmbedderConfig) -> PixelPyramidEmbedder:
    """Options: `pool` (7), `channels` (3), `last_frame_weight` (3.0); `num_frames` from the config."""
    unknown = sorted(set(config.options) - {"pool", "channels", "last_frame_weight"})
    if unknown:
        raise EnvConfigError(
            f"embedder.options: unknown pixel_pyramid option(s) {unknown}; valid: pool, channels, last_frame_weight"
        )
    return PixelPyramidEmbedder(
        config.num_frames,
        int(_option(config, "pool", 7)),
        int(_option(config, "channels", 3)),
        _option(config, "last_frame_weight", 3.0),
    )


@register_video_embedder("privileged_state")
def make_privileged_state(config: EmbedderConfig) -> PrivilegedStateEmbedder:
    """`config.dim` is the env's state size (required)."""
    if config.dim is None:
        raise EnvConfigError(
            "embedder.dim: privileged_state needs the env's state size, got none; set embedder.dim (BabyAI: 3)"
        )
    return PrivilegedStateEmbedder(config.dim)
