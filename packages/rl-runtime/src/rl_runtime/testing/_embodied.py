"""Test doubles of the embodied seam: a last-frame embedder, a random action policy and a word task, with rl-core's
toy line env (`rl_core.testing.ToyEpisodeEnv`), for testing embodied operations and configs without a simulator or
a VLA.

Not the real BabyAI env or VLA (rl-recipes and rl-engines own those); small enough to reason about by hand.
`register_embodied_doubles()` registers the env and the embedder under `TOY_ENV` and `LAST_FRAME`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_core.envs import ENVIRONMENTS, VIDEO_EMBEDDERS, EmbedderConfig, register_environment, register_video_embedder
from rl_core.testing import make_toy_env, toy_spec
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult

TOY_ENV = "toy_line"
"""Registered name of rl-core's toy line env (`rl_core.testing.make_toy_env`, over `ToyEpisodeEnv`)."""
LAST_FRAME = "last_frame_double"
"""Registered name of `LastFrameEmbedder`."""


class LastFrameEmbedder:
    """Test double of a VideoEmbedder: the last frame of the toy env, flattened, as float (an empty video: zeros)."""

    def __init__(self, config: EmbedderConfig) -> None:
        self.size = math.prod(toy_spec().image_shape)

    @property
    def dim(self) -> int:
        return self.size

    def embed(self, videos: Sequence[torch.Tensor]) -> torch.Tensor:
        rows = [v[-1].flatten().float() if v.shape[0] else torch.zeros(self.size) for v in videos]
        return torch.stack(rows)


def register_embodied_doubles() -> None:
    """Register rl-core's toy env as `TOY_ENV` and `LastFrameEmbedder` as `LAST_FRAME` (once; later calls: no-ops)."""
    if TOY_ENV not in ENVIRONMENTS:
        register_environment(TOY_ENV)(make_toy_env)
    if LAST_FRAME not in VIDEO_EMBEDDERS:
        register_video_embedder(LAST_FRAME)(LastFrameEmbedder)


class RandomPolicy:
    """Test double of a VLA rollout policy: uniform bins from the generator, chunk size `chunk`."""

    def __init__(self, chunk: int = 2, bins: int = 3) -> None:
        self.chunk, self.bins = chunk, bins
        self.calls = 0

    def act(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        size = input_ids.shape[0]
        bins = torch.randint(0, self.bins, (size, self.chunk, 1), generator=generator)
        return bins, torch.full((size, self.chunk), -math.log(self.bins))


class WordTask:
    """Test double of an embodied task: instruction words -> ids by a growing vocabulary."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode_instruction(self, text: str) -> tuple[int, ...]:
        return tuple(self.vocab.setdefault(word, len(self.vocab) + 1) for word in text.split())

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        return PromptItem(())

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        return ScoreResult(tuple(0.0 for _ in samples))

    def decode(self, token_ids: Sequence[int]) -> str:
        return ""
