"""The errors the planner raises: bad planner config, plans it cannot place, and timeouts while acquiring slots."""

from __future__ import annotations

from rl_runtime._errors import RLRuntimeError


class PlanningError(RLRuntimeError, ValueError):
    """A plan cannot be placed as asked, or a placement was queried for something it does not hold."""


class PlanningConfigError(PlanningError):
    """A planner config field is invalid; the message names the dotted field path, what was expected and the fix."""


class InsufficientSlotsError(PlanningError):
    """Fewer device slots than sub-graphs: every sub-graph needs at least one worker of its own."""


class PlacementTimeout(RLRuntimeError, TimeoutError):
    """Ray could not reserve the slots in time; the message names the request and what the cluster has."""


class RendezvousTimeout(RLRuntimeError, TimeoutError):
    """A worker waited too long for rank 0 to publish the torch.distributed master address."""


class ProcessGroupError(RLRuntimeError, RuntimeError):
    """torch.distributed is not set up the way the placement needs (not initialised, wrong world size or rank)."""
