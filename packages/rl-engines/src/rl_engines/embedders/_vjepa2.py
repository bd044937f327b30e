"""V-JEPA 2 (`transformers.VJEPA2Model`) as the SRPO world-model video embedder, loaded from a local folder only."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from rl_core.envs import EmbedderConfig, EnvConfigError, register_video_embedder, sample_frame_indices

logger = logging.getLogger(__name__)

_MEAN = (0.485, 0.456, 0.406)  # VJEPA2VideoProcessor's ImageNet normalisation
_STD = (0.229, 0.224, 0.225)


class VJEPA2Embedder:
    """Embeds videos with a V-JEPA 2 encoder: `num_frames` frames by linspace (short videos repeat frames, as siiRL
    pads by cycling), resized to the model's crop, ImageNet-normalised, encoder tokens averaged -> (B, hidden_size).

    The weights come from `path` with `local_files_only=True` (nothing is downloaded): a folder written by
    `save_pretrained`, e.g. a converted `facebook/vjepa2-vitl-fpc64-256` the user provides.
    """

    input_kind = "frames"

    def __init__(self, path: str, num_frames: int = 16, device: str = "cpu", batch_size: int = 8) -> None:
        from transformers import VJEPA2Model

        model = VJEPA2Model.from_pretrained(path, local_files_only=True)
        # transformers types `.to` on PreTrainedModel as taking the model itself
        self.model = model.to(device).eval()  # pyright: ignore[reportArgumentType]
        config = self.model.config
        tubelet = int(config.tubelet_size)
        self._frames = max(tubelet, -(-num_frames // tubelet) * tubelet)  # a multiple of the tubelet size
        self._crop = int(config.crop_size)
        self._dim = int(config.hidden_size)
        self._device = torch.device(device)
        self._batch_size = batch_size
        self._mean = torch.tensor(_MEAN).view(1, 3, 1, 1)
        self._std = torch.tensor(_STD).view(1, 3, 1, 1)

    @property
    def dim(self) -> int:
        """The encoder's hidden size."""
        return self._dim

    @torch.no_grad()
    def embed(self, videos: Sequence[torch.Tensor]) -> torch.Tensor:
        """Embed B videos, each (T_i, 3, H, W) uint8 -> (B, hidden_size) float32; an empty video gives zeros."""
        out = torch.zeros(len(videos), self._dim)
        valid = [i for i, video in enumerate(videos) if video.shape[0] > 0]
        for start in range(0, len(valid), self._batch_size):
            rows = valid[start : start + self._batch_size]
            clips = torch.stack([self._prepare(videos[i]) for i in rows]).to(self._device)
            hidden = self.model(pixel_values_videos=clips, skip_predictor=True).last_hidden_state
            out[rows] = hidden.mean(1).float().cpu()
        return out

    def _prepare(self, video: torch.Tensor) -> torch.Tensor:
        """(T, 3, H, W) uint8 -> (num_frames, 3, crop, crop) float32, normalised."""
        if video.dim() != 4 or video.shape[1] != 3:
            raise EnvConfigError(f"vjepa2: videos must be (T, 3, H, W) uint8, got {tuple(video.shape)}")
        frames = video[sample_frame_indices(video.shape[0], self._frames)].float() / 255.0
        frames = F.interpolate(frames, size=(self._crop, self._crop), mode="bilinear", align_corners=False)
        return (frames - self._mean) / self._std


@register_video_embedder("vjepa2")
def make_vjepa2(config: EmbedderConfig) -> VJEPA2Embedder:
    """`config.path`: a local V-JEPA 2 folder (required); `num_frames`, `device`; option `batch_size` (8)."""
    if config.path is None or not (Path(config.path) / "config.json").is_file():
        raise EnvConfigError(
            f"embedder.path: vjepa2 needs a local folder holding a V-JEPA 2 model (config.json + weights), got "
            f"{config.path!r}; save one with VJEPA2Model.save_pretrained(folder) and set embedder.path to it "
            "(nothing is downloaded)"
        )
    unknown = sorted(set(config.options) - {"batch_size"})
    if unknown:
        raise EnvConfigError(f"embedder.options: unknown vjepa2 option(s) {unknown}; valid: batch_size")
    batch_size = config.options.get("batch_size", 8)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise EnvConfigError(f"embedder.options.batch_size: expected a positive int, got {batch_size!r}")
    logger.info("loading V-JEPA 2 from %s on %s", config.path, config.device)
    return VJEPA2Embedder(config.path, config.num_frames, config.device, batch_size)
