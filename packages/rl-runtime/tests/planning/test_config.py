"""The planner's config classes: defaults, a cattrs round trip, and each field's rejection message."""

from __future__ import annotations

import attrs
import cattrs
import pytest

from rl_runtime.planning import SchedulerConfig
from rl_runtime.planning._config import PlannerConfig, ProcessGroupConfig, SlotGroupConfig
from rl_runtime.planning._errors import PlanningConfigError


def test_defaults() -> None:
    config = PlannerConfig()
    assert config.scheduler == SchedulerConfig(1, 1, "param_aware", False, True, True)
    assert config.slots == SlotGroupConfig(use_gpu=False, cpus_per_slot=1.0, timeout_s=300.0)
    assert config.process_groups == ProcessGroupConfig("auto", 1800.0, 120.0)


def test_round_trips_through_plain_data() -> None:
    config = PlannerConfig(
        SchedulerConfig(
            num_nodes=2, slots_per_node=8, strategy="even", colocate=True, node_cohesion=False, node_load=False
        ),
        SlotGroupConfig(use_gpu=True, cpus_per_slot=4.0, timeout_s=60.0),
        ProcessGroupConfig(backend="nccl", timeout_s=600.0, rendezvous_timeout_s=30.0),
    )
    converter = cattrs.Converter(forbid_extra_keys=True)
    data = converter.unstructure(config)
    assert data["scheduler"]["strategy"] == "even"
    assert converter.structure(data, PlannerConfig) == config


def test_is_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        SchedulerConfig().num_nodes = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: SchedulerConfig(num_nodes=0), r"planner\.scheduler\.num_nodes: expected an int >= 1, found 0"),
        (lambda: SchedulerConfig(num_nodes=True), r"planner\.scheduler\.num_nodes: expected an int >= 1, found True"),
        (lambda: SchedulerConfig(slots_per_node="8"), r"planner\.scheduler\.slots_per_node: .* found '8'; give the"),
        (
            lambda: SchedulerConfig(strategy="param_awre"),
            r"planner\.scheduler\.strategy: expected a known apportion strategy \(even, param_aware\), "
            r"found 'param_awre'; did you mean 'param_aware'\?",
        ),
        (lambda: SchedulerConfig(node_cohesion="yes"), r"planner\.scheduler\.node_cohesion: expected true or false"),
        (lambda: SchedulerConfig(colocate="no"), r"planner\.scheduler\.colocate: expected true or false, found 'no'"),
        (lambda: SchedulerConfig(node_load=1), r"planner\.scheduler\.node_load: expected true or false"),
        (lambda: SlotGroupConfig(use_gpu=None), r"planner\.slots\.use_gpu: expected true or false, found None"),
        (lambda: SlotGroupConfig(cpus_per_slot=0), r"planner\.slots\.cpus_per_slot: expected a finite number > 0"),
        (lambda: SlotGroupConfig(timeout_s=float("nan")), r"planner\.slots\.timeout_s: .* found nan"),
        (
            lambda: ProcessGroupConfig(backend="ncl"),
            r"planner\.process_groups\.backend: expected a known backend \(auto, gloo, nccl\), found 'ncl'; "
            r"did you mean 'nccl'\?",
        ),
        (lambda: ProcessGroupConfig(timeout_s=-1), r"planner\.process_groups\.timeout_s: .* found -1"),
        (lambda: ProcessGroupConfig(rendezvous_timeout_s=float("inf")), r"rendezvous_timeout_s: .* found inf"),
        (
            lambda: PlannerConfig(scheduler={"num_nodes": 1}),
            r"planner\.scheduler: expected a SchedulerConfig, found \{'num_nodes': 1\}; build it with SchedulerConfig",
        ),
    ],
)
def test_rejections(build: object, match: str) -> None:
    with pytest.raises(PlanningConfigError, match=match):
        build()  # type: ignore[operator]


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="num_nodes"):
        SchedulerConfig(num_nodes=-3)
