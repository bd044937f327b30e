"""Running many episodes of one workflow at once, each on its own engine view and its own copy of the data."""
# pyright: reportUnnecessaryIsInstance=false
# (the checks guard values from user code and YAML, whatever their annotations say)

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rl_core.workflows._protocols import EpisodeEngine, EpisodeInput, RolloutWorkflow
from rl_core.workflows._trajectory import Trajectory

logger = logging.getLogger(__name__)

Outcome = Literal["accepted", "rejected", "failed", "malformed", "over_budget"]
"""What became of an episode: a trajectory; the workflow returned None; it raised; it returned something that is
not a `Trajectory`; its trajectory is longer than the engine's `token_budget`."""


@dataclass(frozen=True)
class EpisodeResult:
    """One episode's outcome; `trajectory` is set only when `outcome` is "accepted"; `error` says why not."""

    outcome: Outcome
    trajectory: Trajectory | None = None
    error: str = ""


def episode_input(prompt_ids: Sequence[int], extras: Mapping[str, Any], index: int) -> EpisodeInput:
    """An `EpisodeInput` with its own deep copy of `extras`: episodes of one prompt never share mutable state."""
    return EpisodeInput(tuple(prompt_ids), copy.deepcopy(dict(extras)), index)


async def _one(workflow: RolloutWorkflow, engine: EpisodeEngine, data: EpisodeInput) -> EpisodeResult:
    try:
        result = await workflow.arun_episode(engine, data)
    except Exception as exc:  # A workflow's bug rejects its episode, counted; it must not end the step.
        logger.warning("episode %d of %s raised %s: %s", data.index, type(workflow).__name__, type(exc).__name__, exc)
        return EpisodeResult("failed", error=f"{type(exc).__name__}: {exc}")
    if result is None:
        return EpisodeResult("rejected", error="the workflow returned None")
    if not isinstance(result, Trajectory):
        message = f"arun_episode returned a {type(result).__name__}, expected a Trajectory or None"
        logger.warning("episode %d of %s: %s", data.index, type(workflow).__name__, message)
        return EpisodeResult("malformed", error=message)
    if result.response_len > engine.token_budget:
        message = (
            f"the trajectory has {result.response_len} tokens after its prompt, more than the budget of "
            f"{engine.token_budget} (data.max_response_length); stop the episode earlier and set truncated=True"
        )
        return EpisodeResult("over_budget", error=message)
    return EpisodeResult("accepted", result)


async def arun_episodes(
    workflow: RolloutWorkflow,
    engine_for: Callable[[int], EpisodeEngine],
    inputs: Sequence[EpisodeInput],
    *,
    timeout_s: float | None = None,
) -> list[EpisodeResult]:
    """Every episode of `inputs` concurrently (`asyncio.gather`), episode i on `engine_for(inputs[i].index)`.

    An episode that raises, returns a non-`Trajectory` or exceeds the token budget is not raised but reported in
    its `EpisodeResult`; one still running after `timeout_s` seconds is cancelled and reported "failed".
    """

    async def guarded(data: EpisodeInput) -> EpisodeResult:
        try:
            return await asyncio.wait_for(_one(workflow, engine_for(data.index), data), timeout_s)
        except TimeoutError:
            return EpisodeResult("failed", error=f"the episode ran past rollout.episode_timeout_s={timeout_s}")

    return list(await asyncio.gather(*(guarded(data) for data in inputs)))
