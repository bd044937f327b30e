"""`OpenVLASpec`: what the OpenVLA-OFT path reads from a checkpoint folder, without building the model.

An OpenVLA-OFT folder (SimpleVLA-RL / siiRL style) holds `config.json` (`model_type: openvla`, the Llama
`text_config`, `n_action_bins`, `pad_to_multiple_of`, the remote-code `auto_map`), `preprocessor_config.json` (the
vision backbones' input sizes, means and stds), `dataset_statistics.json` (per-dataset action q01/q99/mask under an
`unnorm_key`), the tokenizer files and the modeling code. The action chunk K and action dims D are constants of the
OFT code, not of the folder: they default to LIBERO's (K=8, D=7) and, like the `unnorm_key` and the center crop, can
be set in an optional `rl_vla.json` beside them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from rl_engines.vla._action_tokenizer import ActionTokenizer, unnormalize
from rl_engines.vla._errors import VLAError

OPENVLA_MODEL_TYPE = "openvla"
"""`config.json`'s `model_type` of an OpenVLA(-OFT) checkpoint folder: what selects the OpenVLA-OFT path."""
SETTINGS_FILE = "rl_vla.json"
"""Optional file in the checkpoint folder: `chunk_size`, `action_dims`, `unnorm_key`, `center_crop`."""
STATS_FILE = "dataset_statistics.json"
PREPROCESSOR_FILE = "preprocessor_config.json"
LIBERO_CHUNK_SIZE, LIBERO_ACTION_DIMS = 8, 7
_SETTINGS = ("chunk_size", "action_dims", "unnorm_key", "center_crop")
_PATCH = 14
CENTER_CROP_AREA = 0.9
"""The area of the center crop OFT's LIBERO checkpoints saw in training (siiRL's `center_crop`)."""


def _read_json(folder: Path, name: str, what: str) -> dict[str, Any]:
    file = folder / name
    if not file.is_file():
        raise VLAError(f"the OpenVLA-OFT folder {str(folder)!r} has no {name} ({what}); copy it from the checkpoint")
    return json.loads(file.read_text())


@dataclass(frozen=True)
class OpenVLASpec:
    """The action head, prompt and pixel layout of an OpenVLA-OFT checkpoint (read by `read_openvla_spec`).

    The names the VLA plumbing reads (`chunk_size`, `action_dims`, `action_bins`, `image_shape`,
    `action_tokens_per_chunk`, `num_patches`) mean what they mean for `TinyVLAConfig`.
    """

    path: str
    chunk_size: int
    action_dims: int
    action_bins: int
    vocab_size: int
    """The tokenizer's vocabulary without the embedding padding: action token of bin b is `vocab_size - 1 - b`."""
    num_patches: int
    input_sizes: tuple[tuple[int, int, int], ...]
    means: tuple[tuple[float, ...], ...]
    stds: tuple[tuple[float, ...], ...]
    stop_token_id: int
    unnorm_key: str
    q01: tuple[float, ...]
    q99: tuple[float, ...]
    mask: tuple[bool, ...]
    center_crop: bool
    model_type: str = OPENVLA_MODEL_TYPE

    @property
    def action_tokens_per_chunk(self) -> int:
        """A = K * D: action tokens one forward emits."""
        return self.chunk_size * self.action_dims

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """`(3, H, W)` of the frame the backbones take; any uint8 RGB frame is resized to it."""
        _, height, width = self.input_sizes[0]
        return (3, height, width)

    def action_tokenizer(self) -> ActionTokenizer:
        """OpenVLA's bins <-> vocab-tail ids over `[-1, 1]` for this checkpoint's vocabulary."""
        return ActionTokenizer(self.action_bins, self.vocab_size)

    def decode_actions(self, bins: torch.Tensor) -> torch.Tensor:
        """`(..., D)` bins -> `(..., D)` float32 actions: bin centres un-normalised with the checkpoint's q01/q99
        where `mask` is true (the gripper stays in [-1, 1])."""
        values = self.action_tokenizer().bins_to_values(bins)
        return unnormalize(values, torch.tensor(self.q01), torch.tensor(self.q99), torch.tensor(self.mask))

    def env_action_bounds(self) -> tuple[list[float], list[float]]:
        """`(low, high)` for an env that un-normalises every dim itself (the LIBERO adapter's `action_low`/
        `action_high`): q01/q99 where `mask` is true, `(-1, 1)` (the identity) where it is false."""
        low = [lo if keep else -1.0 for lo, keep in zip(self.q01, self.mask, strict=True)]
        high = [hi if keep else 1.0 for hi, keep in zip(self.q99, self.mask, strict=True)]
        return low, high


def _positive_int(value: object, name: str, folder: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise VLAError(f"{folder / SETTINGS_FILE}: {name} must be an int >= 1, got {value!r}")
    return value


def _statistics(folder: Path, key: str | None, dims: int) -> tuple[str, dict[str, Any]]:
    stats = _read_json(folder, STATS_FILE, "the action statistics to un-normalise with")
    if key is None:
        if len(stats) != 1:
            raise VLAError(
                f"{folder / STATS_FILE} holds statistics of {sorted(stats)}; set unnorm_key to one of them in "
                f"{folder / SETTINGS_FILE}"
            )
        key = next(iter(stats))
    if key not in stats and f"{key}_no_noops" in stats:
        key = f"{key}_no_noops"  # siiRL's fallback: LIBERO checkpoints store e.g. libero_goal_no_noops
    if key not in stats:
        raise VLAError(f"unnorm_key {key!r} is not in {folder / STATS_FILE}; use one of {sorted(stats)}")
    action = stats[key].get("action", {})
    for field in ("q01", "q99"):
        if len(action.get(field, ())) != dims:
            raise VLAError(
                f"{folder / STATS_FILE}: {key}.action.{field} must hold action_dims={dims} numbers, got "
                f"{action.get(field)!r}; set action_dims in {folder / SETTINGS_FILE} to the checkpoint's"
            )
    return key, action


def read_openvla_spec(folder: str | Path) -> OpenVLASpec:
    """The `OpenVLASpec` of an OpenVLA-OFT checkpoint folder (nothing is built or imported from it).

    Raises:
        VLAError: a file or field the path needs is missing or inconsistent (the message names it and the fix).
    """
    root = Path(folder)
    config = _read_json(root, "config.json", "the model config")
    if config.get("model_type") != OPENVLA_MODEL_TYPE:
        raise VLAError(f"{root / 'config.json'} has model_type {config.get('model_type')!r}, not 'openvla'")
    settings = _read_json(root, SETTINGS_FILE, "") if (root / SETTINGS_FILE).is_file() else {}
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise VLAError(f"{root / SETTINGS_FILE} has unknown keys {unknown}; it takes {list(_SETTINGS)}")
    chunk = _positive_int(settings.get("chunk_size", LIBERO_CHUNK_SIZE), "chunk_size", root)
    dims = _positive_int(settings.get("action_dims", LIBERO_ACTION_DIMS), "action_dims", root)
    text = config.get("text_config") or {}
    padded_vocab = int(text.get("vocab_size", 0))
    vocab = padded_vocab - int(config.get("pad_to_multiple_of", 0))
    bins = int(config.get("n_action_bins", 256))
    if not 2 <= bins <= vocab:
        raise VLAError(
            f"{root / 'config.json'}: n_action_bins={bins} needs a text vocabulary of at least that many ids, found "
            f"text_config.vocab_size={padded_vocab} minus pad_to_multiple_of"
        )
    pre = _read_json(root, PREPROCESSOR_FILE, "the image sizes, means and stds")
    sizes = tuple(tuple(int(x) for x in size) for size in pre["input_sizes"])
    fused = bool(pre.get("use_fused_vision_backbone", len(sizes) > 1))
    if len(sizes) != (2 if fused else 1) or len({s[1:] for s in sizes}) != 1:
        raise VLAError(f"{root / PREPROCESSOR_FILE}: input_sizes {sizes} do not match use_fused_vision_backbone")
    # Prismatic's ViT backbones all cut 14-pixel patches (the micro-batch cost counts them; the forward reads them).
    num_patches = (sizes[0][1] // _PATCH) * (sizes[0][2] // _PATCH) * int(config.get("num_images_in_input", 1))
    key, action = _statistics(root, settings.get("unnorm_key"), dims)
    return OpenVLASpec(
        path=str(root),
        chunk_size=chunk,
        action_dims=dims,
        action_bins=bins,
        vocab_size=vocab,
        num_patches=num_patches,
        input_sizes=sizes,  # pyright: ignore[reportArgumentType]
        means=tuple(tuple(float(x) for x in m) for m in pre["means"]),
        stds=tuple(tuple(float(x) for x in s) for s in pre["stds"]),
        stop_token_id=int(text.get("eos_token_id") or 2),
        unnorm_key=key,
        q01=tuple(float(x) for x in action["q01"]),
        q99=tuple(float(x) for x in action["q99"]),
        mask=tuple(bool(x) for x in action.get("mask", [True] * dims)),
        center_crop=bool(settings.get("center_crop", True)),
    )


def prismatic_pixels(frames: torch.Tensor, spec: OpenVLASpec, dtype: torch.dtype) -> torch.Tensor:
    """`(N, 3, H, W)` uint8 RGB frames -> `(N, 3 * backbones, h, w)` `dtype` pixels as the Prismatic processor makes
    them: (optionally) a center crop of 0.9 of the area, a bicubic resize to each backbone's input size, its
    mean/std normalisation, the backbones' copies stacked on channels. Torch's antialiased bicubic resize stands in
    for PIL's, so the pixels are close to, not bit-equal with, the processor's."""
    if frames.dim() != 4 or frames.shape[1] != 3 or frames.is_floating_point():
        raise VLAError(f"OpenVLA-OFT takes (N, 3, H, W) uint8 RGB frames, got {tuple(frames.shape)} {frames.dtype}")
    images = frames.float() / 255.0
    if spec.center_crop:
        height, width = images.shape[-2:]
        side = math.sqrt(CENTER_CROP_AREA)
        crop_h, crop_w = round(height * side), round(width * side)
        top, left = (height - crop_h) // 2, (width - crop_w) // 2
        images = images[..., top : top + crop_h, left : left + crop_w]
    stacked = []
    for size, mean, std in zip(spec.input_sizes, spec.means, spec.stds, strict=True):
        resized = images
        if tuple(images.shape[-2:]) != tuple(size[1:]):
            resized = F.interpolate(images, size=size[1:], mode="bicubic", antialias=True, align_corners=False)
        resized = resized.clamp(0, 1)
        mean_t = torch.tensor(mean, device=images.device)[:, None, None]
        std_t = torch.tensor(std, device=images.device)[:, None, None]
        stacked.append((resized - mean_t) / std_t)
    return torch.cat(stacked, dim=1).to(dtype)
