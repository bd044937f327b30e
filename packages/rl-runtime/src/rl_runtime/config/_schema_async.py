"""Load-time checks of asynchronous training (`algorithm.max_staleness`) against the rest of the run config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl_runtime.config._errors import ConfigProblem

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

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
