"""`check_policy_matches_env`: a VLA's action head against an env's action space and frame, before any worker
starts."""

from __future__ import annotations

from typing import Protocol

from rl_engines.vla._config import TinyVLAConfig
from rl_engines.vla._errors import VLAError
from rl_engines.vla._openvla_spec import OpenVLASpec


class EnvActionSpace(Protocol):
    """What the check reads of an env spec (`rl_core.envs.EnvSpec` has these fields)."""

    @property
    def name(self) -> str: ...
    @property
    def image_shape(self) -> tuple[int, int, int]: ...
    @property
    def action_dims(self) -> int: ...
    @property
    def action_bins(self) -> int: ...


def check_policy_matches_env(config: TinyVLAConfig | OpenVLASpec, spec: EnvActionSpace) -> None:
    """Raise `VLAError` naming the field when the VLA's action head or frame shape disagrees with the env's.

    The chunk size K is the policy's choice (any K >= 1 runs); the bins, dims and frame shape must be the env's. An
    OpenVLA-OFT checkpoint resizes any RGB frame to its backbones' size, so only its 3 channels are compared.
    """
    openvla = isinstance(config, OpenVLASpec)
    frame_mine, frame_theirs = tuple(config.image_shape), tuple(spec.image_shape)
    if openvla:
        frame_mine, frame_theirs = frame_mine[:1], frame_theirs[:1]
    pairs = (
        ("action_bins", config.action_bins, spec.action_bins),
        ("action_dims", config.action_dims, spec.action_dims),
        ("image_shape", frame_mine, frame_theirs),
    )
    for field, mine, theirs in pairs:
        if mine != theirs:
            fix = (
                f"use a checkpoint for this env ({field} comes from its config.json / rl_vla.json) or an env with "
                f"{field}={mine}"
                if openvla
                else f"build the model with TinyVLAConfig({field}={theirs}) or pick the env it was trained on"
            )
            raise VLAError(f"the VLA's {field}={mine} does not match env {spec.name!r}'s {field}={theirs}; {fix}")
