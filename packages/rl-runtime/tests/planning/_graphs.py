"""Small graphs the planner tests share."""

from __future__ import annotations

from rl_core.graph import NodeRole, Pipeline, TaskGraph


def two_agent_graph(graph_id: str = "ma") -> TaskGraph:
    """A shared rollout and reward feeding two actors: it splits into ma/0 (rollout, reward), ma/1, ma/2."""
    return (
        Pipeline(graph_id)
        .add_node("rollout", "generate", role=NodeRole.ROLLOUT, params={"param_count": 1000})
        .add_node("reward", "compute_reward", role=NodeRole.REWARD, dependencies=["rollout"])
        .add_node(
            "a_train",
            "train_actor",
            role=NodeRole.ACTOR,
            dependencies=["reward"],
            params={"param_count": 7000},
        )
        .add_node(
            "b_train",
            "train_actor",
            role=NodeRole.ACTOR,
            dependencies=["reward"],
            params={"param_count": 3000},
        )
        .build()
    )


def chain(graph_id: str, length: int, param_count: int = 0) -> TaskGraph:
    """A chain of `length` compute nodes, the first declaring `param_count`."""
    pipeline = Pipeline(graph_id)
    for index in range(length):
        pipeline.add_node(
            f"n{index}",
            "compute_advantage",
            role=NodeRole.ADVANTAGE,
            dependencies=[f"n{index - 1}"] if index else [],
            params={"param_count": param_count} if index == 0 else None,
        )
    return pipeline.build()
