"""The built-in single-turn workflow: one model reply to the prompt, scored by the run's task."""

from __future__ import annotations

from rl_core.workflows._protocols import EpisodeEngine, EpisodeInput
from rl_core.workflows._registry import register_workflow
from rl_core.workflows._trajectory import Trajectory, TrajectoryBuilder

SINGLE_TURN = "single_turn"
"""Registered name of `SingleTurnWorkflow`, the default `rollout.workflow`."""


@register_workflow(SINGLE_TURN)
class SingleTurnWorkflow:
    """Prompt in, one response out, no reward of its own (the task scores it).

    The runtime runs this workflow as one batched engine call for all of a step's prompts (the fastest path,
    behaviour identical to this per-episode form); `arun_episode` is the same episode one request at a time.
    """

    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        """One `agenerate` on the prompt; rejected (None) when the model produced no token."""
        completion = await engine.agenerate(data.prompt_ids)
        if not completion.token_ids:
            return None
        builder = TrajectoryBuilder(data.prompt_ids)
        builder.add_completion(completion)
        return builder.build(truncated=completion.finish_reason == "length")
