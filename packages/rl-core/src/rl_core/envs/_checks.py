"""Check an `EnvObservation` against its env's `EnvSpec`: the contract every `VectorEnv` answer must meet."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_core._errors import ShapeError
from rl_core.envs._types import EnvObservation, EnvSpec
from rl_core.schema import FINISH_STEP


def _check(ok: bool, field: str, expected: str, found: object) -> None:
    if not ok:
        raise ShapeError(f"EnvObservation.{field}: expected {expected}, found {found}; fix the env's answer")


def check_observation(obs: EnvObservation, spec: EnvSpec, indices: Sequence[int]) -> None:
    """Raise `ShapeError` naming the field unless `obs` answers `indices` with the contract's shapes and dtypes."""
    n = len(indices)
    _check(obs.indices == tuple(indices), "indices", f"{tuple(indices)} (request order)", obs.indices)
    shape = (n, *spec.image_shape)
    _check(
        tuple(obs.frames.shape) == shape and obs.frames.dtype == torch.uint8,
        "frames",
        f"{shape} uint8",
        f"{tuple(obs.frames.shape)} {obs.frames.dtype}",
    )
    _check(len(obs.instructions) == n, "instructions", f"{n} strings", len(obs.instructions))
    for name, dtype in (("active", torch.bool), ("complete", torch.bool), ("failed", torch.bool)):
        value: torch.Tensor = getattr(obs, name)
        _check(tuple(value.shape) == (n,) and value.dtype == dtype, name, f"({n},) {dtype}", value)
    _check(
        tuple(obs.finish_step.shape) == (n,) and obs.finish_step.dtype == torch.int64,
        FINISH_STEP,
        f"({n},) int64",
        f"{tuple(obs.finish_step.shape)} {obs.finish_step.dtype}",
    )
    _check(
        bool((obs.finish_step >= 0).all()) and bool((obs.finish_step <= spec.max_steps).all()),
        FINISH_STEP,
        f"values in [0, {spec.max_steps}]",
        obs.finish_step,
    )
    _check(not bool((obs.complete & obs.active).any()), "complete", "no running episode marked complete", obs.complete)
    _check(len(obs.video) == n, "video", f"{n} videos", len(obs.video))
    for i, video in enumerate(obs.video):
        _check(
            video.dim() == 4 and tuple(video.shape[1:]) == spec.image_shape and video.dtype == torch.uint8,
            f"video[{i}]",
            f"(T, {', '.join(map(str, spec.image_shape))}) uint8",
            f"{tuple(video.shape)} {video.dtype}",
        )
    if obs.state is not None:
        _check(
            obs.state.dim() == 2 and obs.state.shape[0] == n and obs.state.dtype == torch.float32,
            "state",
            f"({n}, Z) float32",
            f"{tuple(obs.state.shape)} {obs.state.dtype}",
        )
