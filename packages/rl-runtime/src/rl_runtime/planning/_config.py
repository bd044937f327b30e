"""The planner's config: how many slots and how to share them, what a slot reserves, and process-group settings.

Each class validates on construction and raises `PlanningConfigError` naming the dotted path the run config
gives the field (`planner.scheduler.strategy`), what was expected, what was found and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from rl_core import nearest_name
from rl_runtime.planning._apportion import APPORTION_STRATEGIES
from rl_runtime.planning._errors import PlanningConfigError

SECTION = "planner"
"""Where the run config holds a `PlannerConfig`; error messages name fields from here."""

BACKENDS = ("auto", "gloo", "nccl")
"""`auto` picks NCCL when CUDA is available and gloo otherwise."""

DEFAULT_PLACEMENT_TIMEOUT_S = 300.0
"""Long enough for an autoscaler to add a node; a local cluster that lacks the resources will never have them."""

DEFAULT_PROCESS_GROUP_TIMEOUT_S = 1800.0
"""torch.distributed's own default (30 min): a first NCCL communicator over many GPUs can take minutes."""

DEFAULT_RENDEZVOUS_TIMEOUT_S = 120.0
"""Rank 0 publishes its address right after it starts; two minutes covers a slow actor start."""

_Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _fail(section: str, attribute: attrs.Attribute[Any], expected: str, value: object, fix: str) -> None:
    raise PlanningConfigError(f"{section}.{attribute.name}: expected {expected}, found {value!r}; {fix}")


def _int_at_least(section: str, minimum: int, fix: str) -> _Validator:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        # bool is an int subclass, but `true` for a count is a typo.
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            _fail(section, attribute, f"an int >= {minimum}", value, fix)

    return check


def _positive_number(section: str, fix: str) -> _Validator:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            _fail(section, attribute, "a finite number > 0", value, fix)

    return check


def _boolean(section: str) -> _Validator:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, bool):
            _fail(section, attribute, "true or false", value, "write true or false")

    return check


def _one_of(section: str, names: Callable[[], list[str]], kind: str) -> _Validator:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        valid = names()
        if value not in valid:
            near = nearest_name(str(value), valid)
            hint = f"did you mean {near!r}? " if near else ""
            _fail(
                section, attribute, f"a known {kind} ({', '.join(valid)})", value, f"{hint}pick one of the valid names"
            )

    return check


_SCHEDULER = f"{SECTION}.scheduler"
_SLOTS = f"{SECTION}.slots"
_GROUPS = f"{SECTION}.process_groups"


@attrs.frozen
class SchedulerConfig:
    """How many device slots there are and how the TaskScheduler shares them among the sub-graphs."""

    num_nodes: int = attrs.field(default=1, validator=_int_at_least(_SCHEDULER, 1, "count the machines, e.g. 1"))
    """Machines (Ray nodes) the run uses; each holds `slots_per_node` slots."""

    slots_per_node: int = attrs.field(
        default=1, validator=_int_at_least(_SCHEDULER, 1, "give the GPUs (or CPU workers) per machine, e.g. 8")
    )
    """Slots per machine: one worker each (one GPU, or one CPU worker on a CPU-only run)."""

    strategy: str = attrs.field(
        default="param_aware", validator=_one_of(_SCHEDULER, lambda: sorted(APPORTION_STRATEGIES), "apportion strategy")
    )
    """`param_aware` (shares proportional to declared parameter counts) or `even`; see `APPORTION_STRATEGIES`."""

    colocate: bool = attrs.field(default=False, validator=_boolean(_SCHEDULER))
    """Keep each plan graph whole on its slots (colocated rollout, actor and reference) instead of splitting it."""

    node_cohesion: bool = attrs.field(default=True, validator=_boolean(_SCHEDULER))
    """Keep each sub-graph's workers on as few machines as possible."""

    node_load: bool = attrs.field(default=True, validator=_boolean(_SCHEDULER))
    """Put each sub-graph on the least-loaded machine that qualifies, instead of the lowest-numbered one."""


@attrs.frozen
class SlotGroupConfig:
    """What Ray reserves for one slot, and how long to wait for the reservation."""

    use_gpu: bool = attrs.field(default=False, validator=_boolean(_SLOTS))
    """Reserve one GPU per slot (plus `cpus_per_slot` CPUs); otherwise CPUs only."""

    cpus_per_slot: float = attrs.field(
        default=1.0, validator=_positive_number(_SLOTS, "give the CPUs one worker needs, e.g. 1 (fractions allowed)")
    )
    """CPUs reserved per slot."""

    timeout_s: float = attrs.field(
        default=DEFAULT_PLACEMENT_TIMEOUT_S, validator=_positive_number(_SLOTS, "give seconds, e.g. 300")
    )
    """Seconds to wait for Ray to reserve every slot before failing with what the cluster has."""


@attrs.frozen
class ProcessGroupConfig:
    """How the workers join torch.distributed and build their data-parallel groups."""

    backend: str = attrs.field(default="auto", validator=_one_of(_GROUPS, lambda: list(BACKENDS), "backend"))
    """`gloo`, `nccl`, or `auto` (NCCL when CUDA is available, else gloo)."""

    timeout_s: float = attrs.field(
        default=DEFAULT_PROCESS_GROUP_TIMEOUT_S, validator=_positive_number(_GROUPS, "give seconds, e.g. 1800")
    )
    """Timeout of every collective in the groups (and of building them)."""

    rendezvous_timeout_s: float = attrs.field(
        default=DEFAULT_RENDEZVOUS_TIMEOUT_S, validator=_positive_number(_GROUPS, "give seconds, e.g. 120")
    )
    """Seconds a worker waits for rank 0 to publish the master address."""


def _section(section: str, kind: type) -> _Validator:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, kind):
            _fail(section, attribute, f"a {kind.__name__}", value, f"build it with {kind.__name__}(...)")

    return check


@attrs.frozen
class PlannerConfig:
    """The planner's part of the run config (`planner:` in YAML)."""

    scheduler: SchedulerConfig = attrs.field(factory=SchedulerConfig, validator=_section(SECTION, SchedulerConfig))
    """Slots and how they are shared."""

    slots: SlotGroupConfig = attrs.field(factory=SlotGroupConfig, validator=_section(SECTION, SlotGroupConfig))
    """What a slot reserves in Ray."""

    process_groups: ProcessGroupConfig = attrs.field(
        factory=ProcessGroupConfig, validator=_section(SECTION, ProcessGroupConfig)
    )
    """torch.distributed settings."""
