"""Load-time checks of asynchronous training (`algorithm.max_staleness`) against the rest of the run config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl_core.graph import get_pipeline
from rl_runtime.config._errors import ConfigProblem
from rl_runtime.config._schema_algorithm import AUTO_POLICY_LOSS, DECOUPLED_LOSS, resolve_policy_loss

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

CONTINUOUS = "continuous"
"""`algorithm.async_generation` mode whose requests stay in flight across steps and weight updates."""
CONTINUOUS_ENGINES = ("hf",)
"""Rollout engines continuous generation runs on: partial rollouts (pause "keep", cache recomputed) built and tested."""
SINGLE_TURN = "single_turn"
GENERATE = "generate"


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
    if resolve_policy_loss(algorithm) == DECOUPLED_LOSS and algorithm.rollout_correction is not None:
        problems.append(
            ConfigProblem(
                "algorithm.rollout_correction",
                f"null with algorithm.policy_loss={DECOUPLED_LOSS} (it already weights each token by "
                "pi_proximal / pi_behaviour, the ratio TIS/MIS would apply a second time)",
                "a rollout_correction section",
                f"remove algorithm.rollout_correction, or set policy_loss={AUTO_POLICY_LOSS} (ppo under a correction)",
            )
        )
    return problems


def describe_policy_loss(config: RunConfig) -> str:
    """The policy loss `config` runs and, for `algorithm.policy_loss=auto`, why (a line for the run's log)."""
    algorithm = config.algorithm
    loss = resolve_policy_loss(algorithm)
    if algorithm.policy_loss != AUTO_POLICY_LOSS:
        return f"policy loss: {loss} (algorithm.policy_loss)"
    if loss == DECOUPLED_LOSS:
        why = f"algorithm.max_staleness={algorithm.max_staleness} with no algorithm.rollout_correction"
    elif algorithm.max_staleness > 0:
        why = "algorithm.rollout_correction weights the stale samples"
    else:
        why = "algorithm.max_staleness=0, synchronous"
    return f"policy loss: {loss} (algorithm.policy_loss=auto: {why})"


def stale_loss_warning(config: RunConfig) -> str | None:
    """Why `config`'s policy loss leaves its samples' staleness uncorrected, or None when it does not.

    An explicit loss other than decoupled_ppo with `max_staleness > 0` and no `rollout_correction` is a legitimate
    choice, but it clips against the trainer's recomputed old policy and ignores that the samples came from older ones.
    """
    algorithm = config.algorithm
    loss = resolve_policy_loss(algorithm)
    if algorithm.max_staleness == 0 or loss == DECOUPLED_LOSS or algorithm.rollout_correction is not None:
        return None
    return (
        f"algorithm.policy_loss={loss} with algorithm.max_staleness={algorithm.max_staleness} and no "
        "algorithm.rollout_correction: nothing corrects for the samples coming from an older policy (on the packaged "
        f"GRPO recipe it learned far less, docs/async.md); set algorithm.policy_loss={AUTO_POLICY_LOSS} (runs "
        f"{DECOUPLED_LOSS} here) or {DECOUPLED_LOSS}, or add algorithm.rollout_correction"
    )


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
