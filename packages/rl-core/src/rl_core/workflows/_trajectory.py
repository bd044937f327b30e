"""`Completion` (one model call's tokens) and `Trajectory` (one whole episode, every turn), both immutable."""
# pyright: reportUnnecessaryIsInstance=false
# (the checks guard values from user code and YAML, whatever their annotations say)

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rl_core._errors import RLCoreError

FINISH_REASONS = ("stop", "length", "abort")
"""Why a model call or an episode ended: a stop token, a token budget, or cut off from outside."""
NO_VERSION = -1
"""The policy version recorded on tokens the model did not sample (prompt, tool, environment, user)."""


class TrajectoryError(RLCoreError, ValueError):
    """A `Completion` or `Trajectory` is inconsistent (lengths, mask values, versions); the message names the field."""


def _ints(name: str, values: Sequence[int]) -> tuple[int, ...]:
    out = tuple(values)
    for value in out:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TrajectoryError(f"{name} must hold ints, found {value!r} ({type(value).__name__}); pass token ids")
    return out


def _floats(name: str, values: Sequence[float]) -> tuple[float, ...]:
    out = tuple(float(v) for v in values)
    for value in out:
        if not math.isfinite(value):
            raise TrajectoryError(f"{name} must hold finite log-probs, found {value!r}")
    return out


def _same_length(owner: str, reference: str, size: int, **others: tuple[object, ...]) -> None:
    for name, values in others.items():
        if len(values) != size:
            raise TrajectoryError(
                f"{owner}.{name} has {len(values)} entries, expected one per token of {reference} ({size}); "
                "give every token a value"
            )


def _finish(owner: str, reason: str) -> None:
    if reason not in FINISH_REASONS:
        raise TrajectoryError(f"{owner}.finish_reason must be one of {FINISH_REASONS}, got {reason!r}")


@dataclass(frozen=True)
class Completion:
    """What one model call returned: the sampled tokens, their behaviour log-probs and weight versions, why it
    stopped. Made by the runtime's engine adapter (or a test double), read by workflows."""

    token_ids: tuple[int, ...]
    log_probs: tuple[float, ...]
    """Log-prob of each sampled token under the distribution it was drawn from."""
    versions: tuple[int, ...]
    """Policy (weight) version that sampled each token."""
    finish_reason: str = "stop"

    def __post_init__(self) -> None:
        object.__setattr__(self, "token_ids", _ints("Completion.token_ids", self.token_ids))
        object.__setattr__(self, "log_probs", _floats("Completion.log_probs", self.log_probs))
        object.__setattr__(self, "versions", _ints("Completion.versions", self.versions))
        _same_length("Completion", "token_ids", len(self.token_ids), log_probs=self.log_probs, versions=self.versions)
        if any(v < 0 for v in self.versions):
            raise TrajectoryError(f"Completion.versions must be weight versions >= 0, got {self.versions}")
        _finish("Completion", self.finish_reason)


@dataclass(frozen=True)
class Trajectory:
    """One episode as training sees it: the token ids of every turn concatenated, per token.

    `token_ids[:prompt_len]` is the first prompt; after it the model's turns and the environment's (tool, user)
    tokens alternate. `loss_mask` is 1 on the tokens the model sampled (the loss and the advantages cover them)
    and 0 on every other token; `log_probs` and `versions` are the behaviour log-prob and the weight version of
    each sampled token (0.0 and `NO_VERSION` elsewhere); `turn_ids` numbers the turns: 0 on the prompt, k on
    the model's k-th reply and the environment tokens that answer it. All per-token fields are tuples of one
    length, checked at construction; the object is frozen and `metadata` is a read-only copy, so a trajectory
    cannot change once a workflow returns it. Build one turn by turn with `TrajectoryBuilder`.
    """

    token_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    log_probs: tuple[float, ...]
    versions: tuple[int, ...]
    turn_ids: tuple[int, ...]
    prompt_len: int
    reward: float | None = None
    """The episode's reward when the workflow computed it; None lets the run's task score the response."""
    truncated: bool = False
    """True when the episode stopped at the turn limit or the token budget rather than ending by itself."""
    finish_reason: str = "stop"
    """The last model call's finish reason ("stop", "length", "abort")."""
    metadata: Mapping[str, Any] = field(default_factory=dict[str, Any])

    def __post_init__(self) -> None:
        name = "Trajectory"
        object.__setattr__(self, "token_ids", _ints(f"{name}.token_ids", self.token_ids))
        mask = _ints(f"{name}.loss_mask", self.loss_mask)
        object.__setattr__(self, "loss_mask", mask)  # not-a-sample-field: Trajectory attribute
        object.__setattr__(self, "log_probs", _floats(f"{name}.log_probs", self.log_probs))
        object.__setattr__(self, "versions", _ints(f"{name}.versions", self.versions))
        object.__setattr__(self, "turn_ids", _ints(f"{name}.turn_ids", self.turn_ids))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        size = len(self.token_ids)
        _same_length(
            name,
            "token_ids",
            size,
            loss_mask=self.loss_mask,
            log_probs=self.log_probs,
            versions=self.versions,
            turn_ids=self.turn_ids,
        )
        _finish(name, self.finish_reason)
        if isinstance(self.prompt_len, bool) or not isinstance(self.prompt_len, int) or not 0 < self.prompt_len < size:
            raise TrajectoryError(
                f"{name}.prompt_len must be an int in [1, {size - 1}] (a prompt and at least one more token), "
                f"got {self.prompt_len!r}"
            )
        if any(m not in (0, 1) for m in self.loss_mask):
            raise TrajectoryError(f"{name}.loss_mask must hold 0 or 1 per token, got {sorted(set(self.loss_mask))}")
        if any(self.loss_mask[: self.prompt_len]):
            raise TrajectoryError(f"{name}.loss_mask must be 0 on the prompt (the first {self.prompt_len} tokens)")
        if not any(self.loss_mask):
            raise TrajectoryError(f"{name}.loss_mask has no model token; an episode must hold at least one model turn")
        for position, (mask, version) in enumerate(zip(self.loss_mask, self.versions, strict=True)):
            if mask and version < 0:
                raise TrajectoryError(f"{name}.versions[{position}] is {version} on a model token; expected >= 0")
        if any(b < a for a, b in zip(self.turn_ids, self.turn_ids[1:], strict=False)) or self.turn_ids[0] != 0:
            raise TrajectoryError(f"{name}.turn_ids must start at 0 (the prompt) and never decrease")
        if self.reward is not None and not math.isfinite(float(self.reward)):
            raise TrajectoryError(f"{name}.reward must be a finite float or None, got {self.reward!r}")

    @property
    def response_len(self) -> int:
        """Tokens after the first prompt (model and environment tokens together)."""
        return len(self.token_ids) - self.prompt_len

    @property
    def num_turns(self) -> int:
        """Model turns in the episode."""
        return self.turn_ids[-1]

    @property
    def turn_starts(self) -> tuple[int, ...]:
        """Position of the first token of each turn (turn 0, the prompt, starts at 0)."""
        return tuple(i for i, t in enumerate(self.turn_ids) if i == 0 or t != self.turn_ids[i - 1])


class TrajectoryBuilder:
    """Collects one episode's tokens turn by turn; `build` returns the immutable `Trajectory`.

    One builder per episode, never shared: a workflow makes it inside `arun_episode`.
    """

    def __init__(self, prompt_ids: Sequence[int]) -> None:
        """Start with the prompt `prompt_ids` (turn 0, no loss)."""
        prompt = _ints("prompt_ids", prompt_ids)
        if not prompt:
            raise TrajectoryError("TrajectoryBuilder needs a non-empty prompt")
        self._ids = list(prompt)
        self._mask = [0] * len(prompt)
        self._log_probs = [0.0] * len(prompt)
        self._versions = [NO_VERSION] * len(prompt)
        self._turns = [0] * len(prompt)
        self._prompt_len = len(prompt)
        self._turn = 0
        self._finish = "stop"

    @property
    def token_ids(self) -> tuple[int, ...]:
        """Every token so far (the context of the next model call)."""
        return tuple(self._ids)

    @property
    def num_turns(self) -> int:
        """Model turns added so far."""
        return self._turn

    def add_completion(self, completion: Completion) -> None:
        """Append a model turn: its tokens count in the loss."""
        self._turn += 1
        size = len(completion.token_ids)
        self._ids.extend(completion.token_ids)
        self._mask.extend([1] * size)
        self._log_probs.extend(completion.log_probs)
        self._versions.extend(completion.versions)
        self._turns.extend([self._turn] * size)
        self._finish = completion.finish_reason

    def add_observation(self, token_ids: Sequence[int]) -> None:
        """Append tokens the model did not sample (tool output, environment or user message): no loss."""
        ids = _ints("observation token_ids", token_ids)
        self._ids.extend(ids)
        self._mask.extend([0] * len(ids))
        self._log_probs.extend([0.0] * len(ids))
        self._versions.extend([NO_VERSION] * len(ids))
        self._turns.extend([self._turn] * len(ids))

    def build(
        self, *, reward: float | None = None, truncated: bool = False, metadata: Mapping[str, Any] | None = None
    ) -> Trajectory:
        """The episode so far as a `Trajectory` (validated)."""
        return Trajectory(
            token_ids=tuple(self._ids),
            loss_mask=tuple(self._mask),
            log_probs=tuple(self._log_probs),
            versions=tuple(self._versions),
            turn_ids=tuple(self._turns),
            prompt_len=self._prompt_len,
            reward=reward,
            truncated=truncated,
            finish_reason=self._finish,
            metadata=metadata or {},
        )
