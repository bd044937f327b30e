"""Sampling a draw through a `RolloutWorkflow`: every episode of the draw at once, trajectories into batch rows."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

from rl_core.workflows import RolloutWorkflow, arun_episodes, episode_input
from rl_engines.rollout import InferenceEngine, SamplingParams
from rl_runtime.nodes._episode_engine import EngineEpisodes
from rl_runtime.nodes._seeds import sample_uid
from rl_runtime.nodes._task import PromptItem
from rl_runtime.nodes._trajectory_batch import build_trajectory_batch
from rl_runtime.workers import StepData, StepDataError

OUTCOMES = ("accepted", "rejected", "failed", "malformed", "over_budget")


def run_workflow(
    workflow: RolloutWorkflow,
    engine: InferenceEngine,
    items: Sequence[PromptItem],
    samples_per_prompt: int,
    sampling: SamplingParams,
    *,
    seed_parts: tuple[int, ...],
    uid_of: tuple[int, int, int],
    token_budget: int,
    timeout_s: float | None = None,
) -> StepData:
    """`samples_per_prompt` episodes of each prompt, run concurrently; one batch row per accepted trajectory.

    Episode `j * n + k` (k-th of prompt j) gets uid `sample_uid(step, rank, draw, j * n + k)` and group id
    `sample_uid(step, rank, draw, j)`, as in the single-turn path. Rejected, failed, malformed and over-budget
    episodes are left out and counted in `rollout/episodes_<outcome>`; a StepDataError names the first cause when
    no episode is left.
    """
    step, rank, draw = uid_of
    shared = EngineEpisodes(
        engine, sampling, seed_parts=seed_parts, rid_prefix=f"{step}-{rank}-{draw}", token_budget=token_budget
    )
    inputs = [
        episode_input(item.prompt_ids, item.extras, j * samples_per_prompt + k)
        for j, item in enumerate(items)
        for k in range(samples_per_prompt)
    ]
    results = asyncio.run(arun_episodes(workflow, shared.view, inputs, timeout_s=timeout_s))
    counts = Counter(result.outcome for result in results)
    accepted = [(data, result.trajectory) for data, result in zip(inputs, results, strict=True) if result.trajectory]
    if not accepted:
        first = next(result for result in results if result.outcome != "accepted")
        raise StepDataError(
            f"rollout.workflow={type(workflow).__name__}: none of the {len(results)} episodes gave a trajectory "
            f"({dict(counts)}); the first: {first.outcome}, {first.error}"
        )
    trajectories = [trajectory for _, trajectory in accepted]
    data = build_trajectory_batch(
        trajectories,
        [items[d.index // samples_per_prompt].extras for d, _ in accepted],
        [sample_uid(step, rank, draw, d.index) for d, _ in accepted],
        [sample_uid(step, rank, draw, d.index // samples_per_prompt) for d, _ in accepted],
    )
    metrics = {f"rollout/episodes_{outcome}": float(counts.get(outcome, 0)) for outcome in OUTCOMES}
    metrics["rollout/turns_mean"] = sum(t.num_turns for t in trajectories) / len(trajectories)
    metrics["rollout/truncated_rate"] = sum(t.truncated for t in trajectories) / len(trajectories)
    metrics["rollout/engine_calls"] = float(shared.engine_calls)
    return StepData(data.batch, data.extras, metrics)
