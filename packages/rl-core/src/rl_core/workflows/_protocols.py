"""The workflow seam: `RolloutWorkflow.arun_episode(engine, data)` and the small engine protocol it calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rl_core.workflows._trajectory import Completion, Trajectory


@runtime_checkable
class EpisodeEngine(Protocol):
    """What a workflow generates with: token ids in, a `Completion` out, awaited so episodes run concurrently.

    rl-core does not know rl-engines; the runtime adapts its rollout engine to this (the run's sampling settings,
    a seed per episode and turn, the engine's `agenerate` when it has one).
    """

    @property
    def token_budget(self) -> int:
        """Tokens an episode may add after its first prompt (model and environment tokens together); an episode
        longer than this is rejected, so a workflow stops before and marks its trajectory `truncated`."""
        ...

    async def agenerate(
        self, prompt_ids: Sequence[int], *, max_new_tokens: int | None = None, stop_token_ids: Sequence[int] = ()
    ) -> Completion:
        """Sample a continuation of `prompt_ids` (the whole context so far); `max_new_tokens` is capped at the
        run's per-call budget."""
        ...


@dataclass(frozen=True)
class EpisodeInput:
    """What one episode starts from: the task's prompt tokens and the prompt's extras (ground truth, ...).

    `extras` is this episode's own deep copy: a workflow may change what it holds (a message list, say) without
    another episode of the same prompt seeing it (AReaL issue 432).
    """

    prompt_ids: tuple[int, ...]
    extras: Mapping[str, Any] = field(default_factory=dict[str, Any])
    index: int = 0
    """The episode's position in its draw (prompt j, sample k of n is j * n + k)."""


@runtime_checkable
class RolloutWorkflow(Protocol):
    """Runs one episode: prompt, model turns, environment turns, reward. Built once per rollout worker; many
    episodes run at once on one instance, so keep per-episode state inside `arun_episode`."""

    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        """The episode's `Trajectory`, or None to reject it (the runtime counts rejected episodes)."""
        ...
