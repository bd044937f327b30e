"""The embodied rollout loop: a VLA policy acts on a `rl_core.envs.VectorEnv` one action chunk at a time.

Episodes run in waves of at most `env.num_envs`; inside a wave every env still active gets one policy call per
chunk, and the env executes the chunk (an env that finishes inside it ignores the rest). What each episode saw and
did is kept per policy step, as the sample fields `pixel_values`, `action_tokens` and `finish_step` need it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs
import torch

from rl_runtime.workers import StepDataError

if TYPE_CHECKING:
    from rl_core.envs import EnvObservation, VectorEnv

PAD_ID = 0
"""Instruction padding id; the attention mask marks it."""


@runtime_checkable
class ActionPolicy(Protocol):
    """What the embodied rollout samples actions from (`rl_engines.vla.VLAPolicy`)."""

    def act(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample one chunk per row: `input_ids`, `attention_mask` (N, L), `pixel_values` (N, C, H, W) uint8 ->
        bins (N, K, D) int64 and their log-probs (N, K*D)."""
        ...


InstructionEncoder = Callable[[str], Sequence[int]]
"""Turns an env's language instruction into the policy's instruction token ids."""


@attrs.define
class Episode:
    """One finished episode: what the policy saw and emitted at each policy step, and how it ended."""

    task_id: int
    trial_id: int
    instruction: str
    prompt_ids: tuple[int, ...]
    frames: list[torch.Tensor] = attrs.field(factory=list)
    """(C, H, W) uint8 per policy step: the frame the chunk was chosen on."""
    actions: list[torch.Tensor] = attrs.field(factory=list)
    """(K*D,) int64 bins per policy step."""
    log_probs: list[torch.Tensor] = attrs.field(factory=list)
    """(K*D,) float32 per policy step, at the sampling temperature."""
    video: list[torch.Tensor] = attrs.field(factory=list)
    """(T_i, C, H, W) uint8 pieces: every frame the env showed."""
    finish_step: int = 0
    complete: bool = False
    failed: bool = False
    truncated: bool = False
    """Stopped by the rollout's own policy-step bound while the env still ran."""

    def full_video(self) -> torch.Tensor:
        """(T, C, H, W) uint8: every frame of the episode, (0, C, H, W) when none."""
        pieces = [piece for piece in self.video if piece.shape[0] > 0]
        if pieces:
            return torch.cat(pieces)
        shape = self.frames[0].shape if self.frames else (0, 0, 0)
        return torch.zeros((0, *shape), dtype=torch.uint8)


def policy_step_bound(max_steps: int, chunk_size: int) -> int:
    """Policy calls an episode of at most `max_steps` env steps needs with chunks of `chunk_size`."""
    return max(1, math.ceil(max_steps / chunk_size))


def pad_prompts(prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded `(N, L)` int64 ids and their `(N, L)` int64 attention mask."""
    width = max((len(ids) for ids in prompts), default=0)
    if width == 0:
        raise StepDataError("every instruction encoded to no tokens; the instruction tokenizer must emit at least one")
    ids = torch.full((len(prompts), width), PAD_ID, dtype=torch.int64)
    mask = torch.zeros((len(prompts), width), dtype=torch.int64)
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = torch.as_tensor(list(prompt), dtype=torch.int64)
        mask[row, : len(prompt)] = 1
    return ids, mask


def _absorb(episodes: list[Episode], obs: EnvObservation, state: dict[str, torch.Tensor]) -> None:
    """Write an env answer into the wave's state (frames, active) and its episodes (end, video)."""
    for row, slot in enumerate(obs.indices):
        episode = episodes[slot]
        state["frames"][slot] = obs.frames[row]
        state["active"][slot] = bool(obs.active[row])
        episode.finish_step = int(obs.finish_step[row])
        episode.complete = bool(obs.complete[row])
        episode.failed = bool(obs.failed[row])
        episode.video.append(obs.video[row])


async def run_wave(
    env: VectorEnv,
    policy: ActionPolicy,
    encode: InstructionEncoder,
    task_ids: Sequence[int],
    trial_ids: Sequence[int],
    *,
    temperature: float,
    generator: torch.Generator | None,
    max_policy_steps: int,
) -> list[Episode]:
    """Episodes of `(task_ids[i], trial_ids[i])` in env slots 0..n-1, all run to their end (n <= env.num_envs)."""
    obs = await env.reset(list(task_ids), list(trial_ids))
    if tuple(obs.indices) != tuple(range(len(task_ids))):
        raise StepDataError(f"env.reset answered for slots {obs.indices}, expected 0..{len(task_ids) - 1} in order")
    episodes = [
        Episode(task, trial, text, tuple(int(i) for i in encode(text)))
        for task, trial, text in zip(task_ids, trial_ids, obs.instructions, strict=True)
    ]
    input_ids, attention_mask = pad_prompts([episode.prompt_ids for episode in episodes])
    state = {
        "frames": torch.zeros((len(episodes), *obs.frames.shape[1:]), dtype=obs.frames.dtype),
        "active": torch.zeros(len(episodes), dtype=torch.bool),
    }
    _absorb(episodes, obs, state)
    for _ in range(max_policy_steps):
        rows = state["active"].nonzero().flatten()
        if rows.numel() == 0:
            break
        frames = state["frames"][rows]
        bins, log_probs = policy.act(input_ids[rows], attention_mask[rows], frames, temperature, generator)
        if bins.dim() != 3 or bins.shape[0] != rows.numel():
            raise StepDataError(
                f"the policy returned bins of shape {tuple(bins.shape)}; expected (N={rows.numel()}, K, D)"
            )
        for position, slot in enumerate(rows.tolist()):
            episodes[slot].frames.append(frames[position])
            episodes[slot].actions.append(bins[position].reshape(-1).to(torch.int64))
            episodes[slot].log_probs.append(log_probs[position].reshape(-1).to(torch.float32))
        _absorb(episodes, await env.step(rows.tolist(), bins.to(torch.int64)), state)
    for slot in state["active"].nonzero().flatten().tolist():
        episodes[slot].truncated = True
    return episodes


async def run_episodes(
    env: VectorEnv,
    policy: ActionPolicy,
    encode: InstructionEncoder,
    task_ids: Sequence[int],
    trial_ids: Sequence[int],
    *,
    temperature: float,
    generator: torch.Generator | None,
    max_policy_steps: int,
) -> list[Episode]:
    """One episode per `(task_ids[i], trial_ids[i])`, in order, run in waves of `env.num_envs`."""
    if len(task_ids) != len(trial_ids):
        raise StepDataError(
            f"got {len(task_ids)} task ids but {len(trial_ids)} trial ids; give one of each per episode"
        )
    episodes: list[Episode] = []
    width = env.num_envs
    for start in range(0, len(task_ids), width):
        episodes += await run_wave(
            env,
            policy,
            encode,
            task_ids[start : start + width],
            trial_ids[start : start + width],
            temperature=temperature,
            generator=generator,
            max_policy_steps=max_policy_steps,
        )
    return episodes
