"""Process groups in a real 2-process gloo world: two Ray actors in reserved slots, one all_reduce per role group."""

from __future__ import annotations

from typing import Any

import pytest

from rl_core.graph import NodeRole, TaskGraph, get_pipeline
from rl_runtime.planning import Placement, PlanningError, SchedulerConfig, TaskScheduler
from rl_runtime.planning._config import ProcessGroupConfig, SlotGroupConfig
from rl_runtime.planning._errors import ProcessGroupError
from rl_runtime.planning._placement_groups import create_slot_groups
from rl_runtime.planning._process_groups import ProcessGroupManager, resolve_backend
from rl_runtime.planning._ray_rendezvous import ActorRendezvous

GRPO_ROLES = ["rollout", "reward", "advantage", "actor", "reference"]
CONFIG = ProcessGroupConfig(backend="gloo", timeout_s=60, rendezvous_timeout_s=60)


def _renamed(graph: TaskGraph, graph_id: str) -> TaskGraph:
    return graph.subgraph(graph.nodes, graph_id)


def _worker_class() -> Any:
    import ray

    @ray.remote(num_cpus=1)
    class GroupWorker:
        def __init__(self, rank: int, world_size: int, exchange: ActorRendezvous) -> None:
            self.rank, self.world_size, self.exchange = rank, world_size, exchange

        def join(self) -> str:
            from rl_runtime.planning._process_groups import init_distributed

            return init_distributed(self.rank, self.world_size, self.exchange, CONFIG).init_method

        def all_reduce_per_role(self, placement: Placement) -> dict[str, tuple[float, tuple[int, ...]]]:
            """Each role group sums rank + 1 over its members."""
            import torch
            import torch.distributed as dist

            groups = ProcessGroupManager(placement, self.rank, CONFIG)
            out = {}
            for role in groups.roles:
                value = torch.tensor([float(self.rank + 1)])
                dist.all_reduce(value, group=groups.group_for(role))
                out[role.value] = (value.item(), groups.ranks_for(role))
            return out

        def error_of(self, call: str, placement: Placement, rank: int) -> str:
            from rl_runtime.planning._process_groups import init_distributed

            try:
                if call == "init_again":
                    init_distributed(self.rank, self.world_size, self.exchange, CONFIG)
                elif call == "group_for_critic":
                    ProcessGroupManager(placement, rank, CONFIG).group_for(NodeRole.CRITIC)
                else:
                    ProcessGroupManager(placement, rank, CONFIG)
            except Exception as error:  # the message travels back as text
                return f"{type(error).__name__}: {error}"
            return "no error"

    return GroupWorker


@pytest.fixture(scope="module")
def workers(ray_runtime: None) -> Any:
    import ray

    slots = create_slot_groups(1, 2, SlotGroupConfig(timeout_s=60))
    exchange = ActorRendezvous.start()
    cls = _worker_class()
    actors = [cls.options(scheduling_strategy=slots.strategy_for(r)).remote(r, 2, exchange) for r in range(2)]
    addresses = ray.get([actor.join.remote() for actor in actors], timeout=120)
    assert addresses[0] == addresses[1] and addresses[0].startswith("tcp://127.0.0.1:")
    yield actors
    for actor in actors:
        ray.kill(actor)
    slots.remove()


def _schedule(plan: Any, slots: int) -> Placement:
    return TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=slots)).schedule(plan)


def test_one_graph_on_both_ranks_sums_over_both(workers: Any) -> None:
    import ray

    placement = _schedule(get_pipeline("grpo"), 2)
    results = ray.get([w.all_reduce_per_role.remote(placement) for w in workers], timeout=120)
    for result in results:
        assert list(result) == GRPO_ROLES
        assert all(total == 3.0 and ranks == (0, 1) for total, ranks in result.values())  # 1 + 2


def test_two_graphs_one_rank_each_sum_alone(workers: Any) -> None:
    import ray

    grpo = get_pipeline("grpo")
    placement = _schedule([_renamed(grpo, "agent_a"), _renamed(grpo, "agent_b")], 2)
    assert [p.ranks for p in placement.subgraphs] == [(0,), (1,)]
    results = ray.get([w.all_reduce_per_role.remote(placement) for w in workers], timeout=120)
    assert [{total for total, _ in result.values()} for result in results] == [{1.0}, {2.0}]
    assert [{ranks for _, ranks in result.values()} for result in results] == [{(0,)}, {(1,)}]


def test_errors_inside_the_world(workers: Any) -> None:
    import ray

    placement = _schedule(get_pipeline("grpo"), 2)
    worker = workers[0]
    assert ray.get(worker.error_of.remote("init_again", placement, 0)).startswith(
        "ProcessGroupError: torch.distributed is already initialised in this process"
    )
    assert ray.get(worker.error_of.remote("manager", _schedule(get_pipeline("grpo"), 4), 0)) == (
        "ProcessGroupError: this process is rank 0 of 2 in torch.distributed, but the placement has 4 workers and "
        "the manager was given rank 0; start one process per slot and pass each its own rank"
    )
    assert "the manager was given rank 1" in ray.get(worker.error_of.remote("manager", placement, 1))


def test_group_for_a_role_the_worker_does_not_run(workers: Any) -> None:
    import ray

    # Every rank must take part in building the groups, so both build the manager; each asks for CRITIC.
    placement = _schedule(get_pipeline("grpo"), 2)
    messages = ray.get([w.error_of.remote("group_for_critic", placement, r) for r, w in enumerate(workers)])
    assert messages[0] == (
        "PlanningError: rank 0 runs sub-graph 'grpo', which has no 'critic' node, so it has no group for it; "
        "its roles: rollout, reward, advantage, actor, reference"
    )


def test_manager_needs_torch_distributed() -> None:
    with pytest.raises(ProcessGroupError, match=r"torch\.distributed is not initialised in this process"):
        ProcessGroupManager(_schedule(get_pipeline("grpo"), 1), 0)


def test_resolve_backend() -> None:
    import torch

    assert resolve_backend("auto") == ("nccl" if torch.cuda.is_available() else "gloo")
    assert resolve_backend("gloo") == "gloo"
    with pytest.raises(PlanningError, match=r"backend must be 'auto', 'gloo' or 'nccl', got 'mpi'"):
        resolve_backend("mpi")
