"""The Placement value: lookups by rank, node, role and sub-graph, its role groups, its table, and pickling."""

from __future__ import annotations

import pickle

import pytest

from rl_core.graph import NodeRole, get_pipeline
from rl_runtime.planning import Placement, PlanningError, SchedulerConfig, TaskScheduler
from rl_runtime.planning._placement import DataParallelInfo, RoleGroup

from ._graphs import two_agent_graph


@pytest.fixture(scope="module")
def placement() -> Placement:
    return TaskScheduler(SchedulerConfig(num_nodes=2, slots_per_node=4)).schedule(
        [two_agent_graph(), get_pipeline("grpo")]
    )


def test_data_parallel_info_per_node_and_role(placement: Placement) -> None:
    worker = placement.worker(6)  # ma/0 alone: rollout and reward
    assert worker.dp_for_node("rollout") == worker.dp_for_role(NodeRole.REWARD) == DataParallelInfo(0, 1)
    assert placement.worker(3).dp_for_role(NodeRole.ACTOR) == DataParallelInfo(3, 4)


def test_lookup_rejections(placement: Placement) -> None:
    with pytest.raises(PlanningError, match=r"rank must be an int in \[0, 8\), got 8"):
        placement.worker(8)
    with pytest.raises(PlanningError, match=r"has no node 'rollot' \(did you mean 'rollout'\?\); its nodes: rollout"):
        placement.worker(6).dp_for_node("rollot")
    with pytest.raises(
        PlanningError, match=r"rank 0 runs sub-graph 'ma/1', which has no 'critic' node; its roles: actor"
    ):
        placement.worker(0).dp_for_role(NodeRole.CRITIC)
    with pytest.raises(PlanningError, match=r"no sub-graph 'grop' \(did you mean 'grpo'\?\)"):
        placement.subgraph("grop")
    with pytest.raises(PlanningError, match=r"plan graph 'ma' has no node 'critic'"):
        placement.owner("ma", "critic")


def test_owner_and_subgraph(placement: Placement) -> None:
    assert placement.owner("ma", "b_train").subgraph_id == "ma/2"
    assert placement.owner("grpo", "actor_train").ranks == (7,)
    assert placement.subgraph("ma/0").roles == (NodeRole.ROLLOUT, NodeRole.REWARD)


def test_role_groups_in_priority_then_topological_order(placement: Placement) -> None:
    assert placement.role_groups[:4] == (
        RoleGroup("ma/1", NodeRole.ACTOR, (0, 1, 2, 3)),
        RoleGroup("ma/2", NodeRole.ACTOR, (4, 5)),
        RoleGroup("ma/0", NodeRole.ROLLOUT, (6,)),
        RoleGroup("ma/0", NodeRole.REWARD, (6,)),
    )
    assert [g.role for g in placement.role_groups[4:]] == [
        NodeRole.ROLLOUT,
        NodeRole.REWARD,
        NodeRole.ADVANTAGE,
        NodeRole.ACTOR,
        NodeRole.REFERENCE,
    ]


def test_describe(placement: Placement) -> None:
    lines = placement.describe().splitlines()
    assert lines[0] == (
        "placement: 2 node(s) x 4 slot(s) = 8 workers; strategy param_aware, colocate off, node cohesion on, "
        "load balancing on"
    )
    assert lines[1].split() == ["sub-graph", "from", "weight", "workers", "ranks", "nodes"]
    assert lines[2].split() == ["ma/1", "ma", "7,000", "4", "0-3", "0"]
    assert lines[5].split() == ["grpo", "grpo", "0", "1", "7", "1"]
    assert lines[7].split() == ["rank", "node", "slot", "sub-graph", "dp", "roles"]
    assert lines[13].split() == ["5", "1", "1", "ma/2", "1/2", "actor"]
    assert lines[15].split() == ["7", "1", "3", "grpo", "0/1", "rollout,reward,advantage,actor,reference"]


def test_describe_compresses_rank_spans() -> None:
    config = SchedulerConfig(num_nodes=2, slots_per_node=4, node_cohesion=False)
    placement = TaskScheduler(config).schedule(two_agent_graph())
    # Not cohesive, balanced: ma/1 (5 of 8 slots) alternates nodes: slots 0, 4, 1, 5, 2.
    assert placement.subgraph("ma/1").ranks == (0, 1, 2, 4, 5)
    assert placement.describe().splitlines()[2].split()[4:] == ["0-2,4-5", "0,1"]


def test_pickles_as_the_same_value(placement: Placement) -> None:
    assert pickle.loads(pickle.dumps(placement)) == placement
