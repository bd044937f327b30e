"""Load-time checks of asynchronous training (`algorithm.max_staleness`) against the rest of the run config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl_core.graph import get_pipeline
from rl_runtime.config._errors import ConfigProblem

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

CONTINUOUS = "continuous"
"""`algorithm.async_generation` mode whose requests stay in flight across steps and weight updates."""
CONTINUOUS_ENGINES = ("hf",)
"""Rollout engines continuous generation runs on: partial rollouts (pause "keep", cache recomputed) built and tested."""
SINGLE_TURN = "single_turn"
GENERATE = "generate"
DECOUPLED_LOSS = "decoupled_ppo"
"""The policy loss that weights every token by proximal / behaviour itself (rl_core.losses.decoupled_ppo)."""


def async_problems(config: RunConfig) -> list[ConfigProblem]:
    """What `algorithm.max_staleness` and the off-policy correction cannot run with in `config`."""
    algorithm = config.algorithm
    problems = []
    eta = algorithm.max_staleness
    if eta > 0 and config.placement.colocate:
        # Colocated, every slot generates then trains in turn on the same device: there is nothing to overlap,
        # and the rollout engine sleeps while the actor trains, so it cannot run ahead.
        problems.append(
            ConfigProblem(
                "algorithm.max_staleness",
                "0 with placement.colocate=true (asynchronous training overlaps rollout slots with training slots)",
                str(eta),
                "set placement.colocate=false, or algorithm.max_staleness=0",
            )
        )
    if algorithm.async_generation == CONTINUOUS:
        problems += _continuous_problems(config)
    if algorithm.policy_loss == DECOUPLED_LOSS and algorithm.rollout_correction is not None:
        problems.append(
            ConfigProblem(
                "algorithm.rollout_correction",
                f"null with algorithm.policy_loss={DECOUPLED_LOSS} (it already weights each token by "
                "pi_proximal / pi_behaviour, the ratio TIS/MIS would apply a second time)",
                "a rollout_correction section",
                f"remove algorithm.rollout_correction, or use policy_loss=ppo with it instead of {DECOUPLED_LOSS}",
            )
        )
    return problems


def _continuous_problems(config: RunConfig) -> list[ConfigProblem]:
    """What `algorithm.async_generation=continuous` cannot run with."""
    problems = []
    if config.algorithm.max_staleness < 1:
        # The pipeline's own lag: a group still generating when a step takes the finished ones is trained at a later
        # step, at least one version after its first token, so a bound of 0 would drop every one of them.
        problems.append(
            ConfigProblem(
                "algorithm.max_staleness",
                ">= 1 with algorithm.async_generation=continuous (groups that finish after their step are trained "
                "a step later, one version behind: the lag continuous generation has by itself)",
                str(config.algorithm.max_staleness),
                "set algorithm.max_staleness=1 or more, or algorithm.async_generation=step",
            )
        )
    if GENERATE not in {node.operation for node in get_pipeline(config.pipeline).nodes.values()}:
        problems.append(
            ConfigProblem(
                "algorithm.async_generation",
                f"step with pipeline {config.pipeline!r} (continuous generation replaces its {GENERATE!r} node, which "
                "it has none of)",
                CONTINUOUS,
                "set algorithm.async_generation=step, or use a pipeline that generates text",
            )
        )
    if config.rollout.engine not in CONTINUOUS_ENGINES:
        problems.append(
            ConfigProblem(
                "rollout.engine",
                f"one of {list(CONTINUOUS_ENGINES)} with algorithm.async_generation=continuous (partial rollouts "
                "across weight updates are built for it)",
                config.rollout.engine,
                "set rollout.engine=hf, or algorithm.async_generation=step",
            )
        )
    if config.rollout.workflow != SINGLE_TURN:
        problems.append(
            ConfigProblem(
                "rollout.workflow",
                f"{SINGLE_TURN} with algorithm.async_generation=continuous (it keeps single requests in flight, not "
                "episodes)",
                config.rollout.workflow,
                f"set rollout.workflow={SINGLE_TURN}, or algorithm.async_generation=step",
            )
        )
    return problems
