"""Reserving slots with real Ray placement groups (2 CPUs): actors land in their rank's bundle; timeouts explain."""

from __future__ import annotations

import pytest

from rl_runtime.planning import PlanningError
from rl_runtime.planning._config import SlotGroupConfig
from rl_runtime.planning._errors import PlacementTimeout
from rl_runtime.planning._placement_groups import create_slot_groups, slot_bundle

pytestmark = pytest.mark.usefixtures("ray_runtime")


def _where_am_i() -> type:
    import ray

    @ray.remote(num_cpus=1)
    class Probe:
        def placement_group_id(self) -> str:
            return ray.get_runtime_context().get_placement_group_id()

    return Probe


def test_bundles() -> None:
    assert slot_bundle(SlotGroupConfig()) == {"CPU": 1.0}
    assert slot_bundle(SlotGroupConfig(use_gpu=True, cpus_per_slot=4)) == {"GPU": 1.0, "CPU": 4.0}


@pytest.mark.parametrize(("num_nodes", "slots_per_node"), [(1, 2), (2, 1)])
def test_actors_run_in_their_ranks_group(num_nodes: int, slots_per_node: int) -> None:
    import ray
    from ray.util.placement_group import placement_group_table

    probe = _where_am_i()
    slots = create_slot_groups(num_nodes, slots_per_node, SlotGroupConfig(timeout_s=60))
    with slots:
        assert slots.world_size == 2 and len(slots.groups) == num_nodes
        strategies = slots.strategies()
        assert [s.placement_group_bundle_index for s in strategies] == ([0, 1] if num_nodes == 1 else [0, 0])
        actors = [probe.options(scheduling_strategy=strategy).remote() for strategy in strategies]
        found = ray.get([actor.placement_group_id.remote() for actor in actors], timeout=60)
        assert found == [slots.groups[rank // slots_per_node].id.hex() for rank in range(2)]
        assert ray.available_resources().get("CPU", 0.0) == 0.0  # both CPUs are reserved
    assert [placement_group_table(group)["state"] for group in slots.groups] == ["REMOVED"] * num_nodes
    for actor in actors:
        ray.kill(actor)


def test_timeout_names_the_request_and_the_cluster() -> None:
    from ray.util.placement_group import placement_group_table

    with pytest.raises(
        PlacementTimeout,
        match=r"could not reserve 1 node\(s\) x 3 slot\(s\) of \{'CPU': 1\.0\} \(3 CPU in total, each node's slots "
        r"on one machine\) within 0\.5 s; the cluster has 2 CPU, 0 GPU, 2 CPU, 0 GPU available now; lower",
    ):
        create_slot_groups(1, 3, SlotGroupConfig(timeout_s=0.5))
    # The pending group was removed, so it does not hold on to the two CPUs it could get.
    assert all(entry["state"] == "REMOVED" for entry in placement_group_table().values())


def test_rejections() -> None:
    with pytest.raises(PlanningError, match=r"slots_per_node must be an int >= 1, got 0"):
        create_slot_groups(1, 0)
    with (
        create_slot_groups(1, 1, SlotGroupConfig(timeout_s=60)) as slots,
        pytest.raises(PlanningError, match=r"rank must be an int in \[0, 1\), got 1"),
    ):
        slots.strategy_for(1)
