"""Rollout workflows: `RolloutWorkflow.arun_episode(engine, data) -> Trajectory | None` and what it works with.

A workflow runs one episode (one or many model turns, tool or environment turns between them, its reward) on an
`EpisodeEngine` and returns an immutable `Trajectory`; the runtime runs many episodes at once (asyncio) and turns
their trajectories into batch rows (`loss_mask`, `turn_id`, `token_policy_version`). Torch-free: the runtime adapts
its rollout engine to `EpisodeEngine`. Workflows are chosen by `rollout.workflow` as a registered name, a module
path or a file (`load_workflow`); the default `single_turn` is today's one-reply path.
"""

from rl_core.workflows._loading import WorkflowLoadError, load_workflow, resolve_workflow
from rl_core.workflows._protocols import EpisodeEngine, EpisodeInput, RolloutWorkflow
from rl_core.workflows._registry import WORKFLOWS, WorkflowFactory, get_workflow, register_workflow
from rl_core.workflows._run import EpisodeResult, Outcome, arun_episodes, episode_input
from rl_core.workflows._single_turn import SINGLE_TURN, SingleTurnWorkflow
from rl_core.workflows._trajectory import (
    FINISH_REASONS,
    NO_VERSION,
    Completion,
    Trajectory,
    TrajectoryBuilder,
    TrajectoryError,
)

__all__ = [
    "FINISH_REASONS",
    "NO_VERSION",
    "SINGLE_TURN",
    "WORKFLOWS",
    "Completion",
    "EpisodeEngine",
    "EpisodeInput",
    "EpisodeResult",
    "Outcome",
    "RolloutWorkflow",
    "SingleTurnWorkflow",
    "Trajectory",
    "TrajectoryBuilder",
    "TrajectoryError",
    "WorkflowFactory",
    "WorkflowLoadError",
    "arun_episodes",
    "episode_input",
    "get_workflow",
    "load_workflow",
    "register_workflow",
    "resolve_workflow",
]
