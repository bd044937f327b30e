"""Split placement's plan: the pipeline cut into rollout and training sub-graphs, their slots, the engines each
slot builds, and every pipeline or checkpoint it refuses."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from rl_core.graph import CrossDependency, NodeRole, Pipeline, TaskGraph, get_pipeline
from rl_runtime.config import ConfigError, KLMode, RankBalancing
from rl_runtime.nodes._rebalance import with_rebalance
from rl_runtime.trainer import Trainer, TrainerError
from rl_runtime.trainer._checkpoints import CHECKPOINTS_DIR, STATE_FILE
from rl_runtime.trainer._split import RECEIVE_WEIGHTS_NODE, STALENESS_BUFFER_NODE, plan_placement, split_pipeline
from rl_runtime.trainer._worker_state import SlotEngines

from ._task import TokenTask, tiny_config

SPLIT = {"colocate": False, "strategy": "even"}


def _ids(graph: TaskGraph) -> list[str]:
    return list(graph.topological_order)


def test_grpo_splits_after_the_reward_and_the_rollout_ends_waiting_for_weights() -> None:
    split = split_pipeline(get_pipeline("grpo"))
    rollout, train = split.subgraphs

    assert rollout.graph_id == "grpo/rollout" and train.graph_id == "grpo/train"
    assert _ids(rollout) == ["rollout_actor", "function_reward", RECEIVE_WEIGHTS_NODE]
    receive = rollout[RECEIVE_WEIGHTS_NODE]
    assert (receive.operation, receive.role, receive.dependencies) == (
        "receive_weights",
        NodeRole.ROLLOUT,
        ("function_reward",),
    )
    assert _ids(train) == ["calculate_advantages", "actor_old_log_prob", "reference_log_prob", "actor_train"]
    assert train["calculate_advantages"].dependencies == ()  # its input crosses from the rollout slots
    assert split.cross_dependencies == (
        CrossDependency("grpo/rollout", "function_reward", "grpo/train", "calculate_advantages"),
    )


@pytest.mark.parametrize(
    ("pipeline", "rollout", "first_training"),
    [
        ("dapo", ["rollout_actor", "function_reward", "dynamic_sampling"], "calculate_advantages"),
        ("ppo", ["rollout_actor", "function_reward"], "compute_value"),  # the critic trains on the training slots
    ],
)
def test_sampling_and_reward_nodes_stay_on_the_rollout_side(
    pipeline: str, rollout: list[str], first_training: str
) -> None:
    split = split_pipeline(get_pipeline(pipeline))

    assert _ids(split.subgraphs[0]) == [*rollout, RECEIVE_WEIGHTS_NODE]
    assert [(dep.upstream_node, dep.downstream_node) for dep in split.cross_dependencies] == [
        (rollout[-1], first_training)
    ]


@pytest.mark.parametrize(
    ("pipeline", "rollout", "training"),
    [
        ("grpo", ["rollout_actor", "function_reward"], []),
        ("dapo", ["rollout_actor", "function_reward", "dynamic_sampling"], []),
        ("remax", ["rollout_actor", "function_reward", "greedy_baseline"], []),
        ("ppo", ["rollout_actor", "function_reward"], ["compute_value"]),
    ],
)
@pytest.mark.parametrize("staleness_buffer", [False, True])
def test_a_kl_in_reward_variant_splits_with_every_forward_on_the_training_side(
    pipeline: str, rollout: list[str], training: list[str], staleness_buffer: bool
) -> None:
    # kl.mode=in_reward: the log-prob forwards move before the advantages, all on the training slots.
    split = split_pipeline(get_pipeline(pipeline, kl_in_reward=True), staleness_buffer=staleness_buffer)

    sent = STALENESS_BUFFER_NODE if staleness_buffer else rollout[-1]
    assert _ids(split.subgraphs[0]) == [*rollout, *([sent] if staleness_buffer else []), RECEIVE_WEIGHTS_NODE]
    forwards = ["actor_old_log_prob", "reference_log_prob", "calculate_advantages", "actor_train"]
    assert _ids(split.subgraphs[1]) == [*training, *forwards, *(["critic_train"] if pipeline == "ppo" else [])]
    first = [*training, *forwards][0]
    assert [(dep.upstream_node, dep.downstream_node) for dep in split.cross_dependencies] == [(sent, first)]


def test_embodied_srpo_filters_on_the_training_side_so_the_edge_carries_every_episode() -> None:
    # The accuracy band keeps a varying number of episodes; the coordinator edge's consumer reads the plan's count.
    split = split_pipeline(get_pipeline("embodied_srpo"))
    rollout, train = split.subgraphs

    assert _ids(rollout) == ["rollout_actor", RECEIVE_WEIGHTS_NODE]
    assert _ids(train)[:3] == ["dynamic_sampling", "compute_reward", "calculate_advantages"]
    assert train["dynamic_sampling"].role is NodeRole.DEFAULT  # uses no model: the training slots build no env
    assert split.cross_dependencies == (
        CrossDependency("embodied_srpo/rollout", "rollout_actor", "embodied_srpo/train", "dynamic_sampling"),
    )


def test_a_rebalance_node_goes_with_the_training_slots() -> None:
    rollout, train = split_pipeline(with_rebalance(get_pipeline("grpo"), RankBalancing.SAMPLES)).subgraphs
    assert "rebalance" in train and "rebalance" not in rollout


def _graph(*nodes: tuple[Any, ...]) -> TaskGraph:
    """A pipeline of (id, operation, role, *dependencies[, params]) nodes."""
    pipeline = Pipeline("custom")
    for node_id, operation, role, *rest in nodes:
        params = rest.pop() if rest and isinstance(rest[-1], dict) else None
        pipeline.add_node(node_id, operation, role=role, dependencies=rest, params=params)
    return pipeline.build()


GEN = ("gen", "generate", NodeRole.ROLLOUT)
TRAIN = ("train", "train_actor", NodeRole.ACTOR, "gen")


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        (
            _graph(GEN, TRAIN, (RECEIVE_WEIGHTS_NODE, "compute_advantage", NodeRole.ADVANTAGE, "train")),
            r"has a node 'receive_weights', the id split placement gives .*; rename the node or set "
            r"placement.colocate=true",
        ),
        (
            _graph(("old", "compute_old_log_prob", NodeRole.ACTOR), ("train", "train_actor", NodeRole.ACTOR, "old")),
            r"placement.colocate=false: pipeline 'custom' has no rollout part .*; set placement.colocate=true",
        ),
        (
            _graph(GEN, ("reward", "compute_reward", NodeRole.REWARD, "gen")),
            r"has no training part",
        ),
        (
            _graph(
                GEN,
                ("old", "compute_old_log_prob", NodeRole.ACTOR, "gen"),
                ("filter", "dynamic_sampling", NodeRole.DYNAMIC_SAMPLING, "old"),
                ("train", "train_actor", NodeRole.ACTOR, "filter"),
            ),
            r"node\(s\) 'filter' of pipeline 'custom' use the rollout engine but run after a training node, .*; "
            r"move them before the training nodes or set placement.colocate=true",
        ),
        (
            _graph(GEN, TRAIN, ("again", "train_actor", NodeRole.ACTOR, "train")),
            r"has 2 'train_actor' nodes; the rollout slots wait for exactly one actor update",
        ),
    ],
)
def test_pipelines_split_placement_cannot_run_are_refused(graph: TaskGraph, message: str) -> None:
    with pytest.raises(TrainerError, match=message):
        split_pipeline(graph)


def _config(tmp_path: Path, **placement: Any) -> Any:
    return tiny_config(tmp_path, placement=placement)


def test_two_slots_put_the_rollout_on_slot_0_and_the_training_on_slot_1(tmp_path: Path) -> None:
    placement = plan_placement(_config(tmp_path, **SPLIT), get_pipeline("grpo"))

    assert [(w.rank, w.subgraph.subgraph_id, w.dp.rank, w.dp.size) for w in placement.workers] == [
        (0, "grpo/rollout", 0, 1),
        (1, "grpo/train", 0, 1),
    ]
    assert len(placement.cross_dependencies) == 1
    assert "colocate off" in placement.describe()


def test_colocated_placement_runs_the_whole_pipeline_on_every_slot(tmp_path: Path) -> None:
    placement = plan_placement(_config(tmp_path), get_pipeline("grpo"))
    assert [(w.subgraph.subgraph_id, w.dp.rank, w.dp.size) for w in placement.workers] == [
        ("grpo", 0, 2),
        ("grpo", 1, 2),
    ]
    assert placement.cross_dependencies == ()


def test_even_gives_the_odd_slot_to_the_rollout_and_keeps_each_side_on_one_node(tmp_path: Path) -> None:
    three = plan_placement(_config(tmp_path, slots=3, **SPLIT), get_pipeline("grpo"))
    assert [p.ranks for p in three.subgraphs] == [(0, 1), (2,)]
    four = plan_placement(_config(tmp_path, slots=4, slots_per_node=2, **SPLIT), get_pipeline("grpo"))
    assert [(p.ranks, {w.node_index for w in four.workers if w.rank in p.ranks}) for p in four.subgraphs] == [
        ((0, 1), {0}),
        ((2, 3), {1}),
    ]


def test_param_aware_shares_slots_by_the_parameter_counts_the_nodes_declare(tmp_path: Path) -> None:
    graph = _graph(
        ("gen", "generate", NodeRole.ROLLOUT, {"param_count": 100}),
        ("train", "train_actor", NodeRole.ACTOR, "gen", {"param_count": 300}),
    )
    placement = plan_placement(_config(tmp_path, slots=4, colocate=False, strategy="param_aware"), graph)
    # 4 slots in proportion 100 : 300 -> 1 : 3
    assert [(p.subgraph_id, p.weight, p.ranks) for p in placement.subgraphs] == [
        ("custom/rollout", 100, (0,)),
        ("custom/train", 300, (1, 2, 3)),
    ]


def test_the_batch_plan_is_checked_against_the_split_data_parallel_sizes(tmp_path: Path) -> None:
    # 5 slots: rollout 3, training 2; 4 prompts per step cannot split over 3 rollout ranks
    with pytest.raises(ConfigError, match=r"batch.prompts_per_step.*cannot split over rollout dp=3"):
        Trainer(_config(tmp_path, slots=5, **SPLIT), TokenTask)


@pytest.mark.parametrize(
    ("roles", "changes", "expected"),
    [
        ({NodeRole.ROLLOUT, NodeRole.REWARD}, {}, SlotEngines(True, False, False, False)),
        ({NodeRole.ROLLOUT, NodeRole.DYNAMIC_SAMPLING}, {}, SlotEngines(True, False, False, False)),
        ({NodeRole.ADVANTAGE, NodeRole.ACTOR, NodeRole.REFERENCE}, {}, SlotEngines(False, True, True, False)),
        ({NodeRole.ACTOR, NodeRole.REFERENCE}, {"kl": "none"}, SlotEngines(False, True, False, False)),
        ({NodeRole.ACTOR, NodeRole.CRITIC}, {"critic": True}, SlotEngines(False, True, False, True)),
    ],
)
def test_each_slot_builds_only_the_engines_its_roles_use(
    tmp_path: Path, roles: set[NodeRole], changes: dict[str, Any], expected: SlotEngines
) -> None:
    config = tiny_config(tmp_path)  # KL as a loss with coef 0.01: the reference is used
    if "kl" in changes:
        kl = attrs.evolve(config.algorithm.kl, mode=KLMode.NONE, coef=0.0)
        config = attrs.evolve(config, algorithm=attrs.evolve(config.algorithm, kl=kl))
    if "critic" in changes:
        config = attrs.evolve(config, pipeline="ppo", critic=config.actor)
    assert SlotEngines.for_roles(roles, config) == expected


def _write_checkpoint(run_dir: Path, state: Mapping[str, Any]) -> None:
    folder = run_dir / CHECKPOINTS_DIR / "step_00000002"
    folder.mkdir(parents=True)
    (folder / STATE_FILE).write_text(json.dumps(state))


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            {"step": 2, "total_steps": 4, "slots": 2, "colocate": True, "pipeline": "grpo"},
            r"written with placement.colocate=true, this run has false: its ranks hold other engines and data "
            r"shards; resume with the same placement.colocate or set trainer.resume=never",
        ),
        (
            {"step": 2, "total_steps": 4, "slots": 2, "pipeline": "grpo"},  # written before split placement existed
            r"written with placement.colocate=true",
        ),
        (
            {"step": 2, "total_steps": 4, "slots": 3, "colocate": False, "pipeline": "grpo"},
            r"written with placement.slots=3, this run has 2; resume with the same slots or set trainer.resume=never",
        ),
    ],
)
def test_a_checkpoint_of_another_placement_is_refused_before_any_worker_starts(
    tmp_path: Path, state: dict[str, Any], message: str
) -> None:
    config = tiny_config(tmp_path, placement=SPLIT)
    _write_checkpoint(Path(config.trainer.output_dir), state)
    with pytest.raises(TrainerError, match=message):
        Trainer(config, TokenTask)
