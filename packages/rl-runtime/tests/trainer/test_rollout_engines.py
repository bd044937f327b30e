"""Rollout engines and weight-sync transports through the Trainer: GRPO steps with `rollout.engine: server` (our
HTTP rollout server, one started on each slot or an external fleet, which keeps training when one of its servers
is killed), and a 2-step run per `rollout.weight_sync`
transport, each sync verified (version and weights checksum) by the WeightSync."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rl_engines.remote import LocalServer
from rl_engines.sync import free_port
from rl_engines.training import load_hf_config
from rl_runtime.nodes._train import SERVERS_SKIPPED_METRIC
from rl_runtime.trainer import Trainer, TrainResult
from rl_runtime.trainer._weight_transport import WEIGHT_SYNC_DIR
from rl_runtime.workers._errors import WorkerStartError

from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow
_ONE_SLOT = {"slots": 1}
_SHORT = {"total_steps": 2, "checkpoint_every": 2, "validate_every": 0}


def _run(folder: Path, rollout: dict[str, Any], placement: dict[str, Any] | None = None) -> TrainResult:
    return Trainer(tiny_config(folder, placement=placement, rollout=rollout, **_SHORT), TokenTask).fit()


def _assert_trained_and_verified(result: TrainResult) -> None:
    assert [result.start_step, result.end_step, len(result.history)] == [0, 2, 2]
    for metrics in result.history:
        _assert_step_trained_and_verified(metrics)


def _assert_step_trained_and_verified(metrics: dict[str, float]) -> None:
    assert metrics["actor/grad_norm"] > 0
    assert metrics["sync/num_tensors"] > 0 and "sync/weights_checksum" in metrics
    assert metrics["perf/total_num_tokens"] > 0


def test_two_grpo_steps_through_a_rollout_server_on_each_slot(tmp_path: Path, ray_runtime: None) -> None:
    result = _run(tmp_path, {"engine": "server"})
    _assert_trained_and_verified(result)


def test_split_placement_gives_the_rollout_slots_server_the_actors_weights(tmp_path: Path, ray_runtime: None) -> None:
    result = _run(tmp_path, {"engine": "server"}, {"colocate": False, "strategy": "even"})
    assert [result.start_step, result.end_step] == [0, 2]
    for step, metrics in enumerate(result.history):
        # The rollout slot's server holds what the training slot sent: its own sync verified the same checksum.
        assert metrics["sync/weight_version"] == metrics["rollout/weight_version"] == step + 1
        assert metrics["rollout/weights_checksum"] == metrics["sync/weights_checksum"]
        assert metrics["actor/grad_norm"] > 0


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[list[LocalServer]]:
    hf_config = load_hf_config(tiny_config(tmp_path / "probe").actor.model)
    servers: list[LocalServer] = []
    try:
        servers += [LocalServer.start(hf_config), LocalServer.start(hf_config)]
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_two_grpo_steps_against_an_external_fleet_of_two_servers_one_killed_after_step_one(
    tmp_path: Path, ray_runtime: None, two_servers: list[LocalServer]
) -> None:
    addresses = [server.url for server in two_servers]
    config = tiny_config(tmp_path, placement=_ONE_SLOT, rollout={"engine": "server", "servers": addresses}, **_SHORT)
    with Trainer(config, TokenTask).session() as run:
        history = [run.step()]
        two_servers[1].stop()  # killed mid-run: its requests go to the other, the weight update skips it
        history.append(run.step())
    assert run.next_step == 2
    for metrics in history:
        _assert_step_trained_and_verified(metrics)
    assert SERVERS_SKIPPED_METRIC not in history[0] and history[1][SERVERS_SKIPPED_METRIC] == 1.0


def test_a_server_that_does_not_answer_stops_the_run_before_step_one_naming_it(
    tmp_path: Path, ray_runtime: None
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    rollout = {"engine": "server", "servers": [dead], "engine_kwargs": {"connect_attempts": 2, "retry_backoff_s": 0.1}}
    with pytest.raises(WorkerStartError, match=rf"rollout server {dead} did not answer in 2 tries"):
        _run(tmp_path, rollout, _ONE_SLOT)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # no step ran


@pytest.fixture(scope="module")
def by_reference(tmp_path_factory: pytest.TempPathFactory, ray_runtime: None) -> TrainResult:
    """The in-process HF engine synced by reference, the run every other transport must reproduce."""
    return _run(tmp_path_factory.mktemp("reference"), {"weight_sync": "reference"}, _ONE_SLOT)


def _checksums(result: TrainResult) -> list[float]:
    return [metrics["sync/weights_checksum"] for metrics in result.history]


@pytest.mark.parametrize("transport", ["reference", "shared_memory", "disk", "broadcast"])
def test_each_transport_into_the_hf_engine_trains_as_by_reference(
    transport: str, tmp_path: Path, by_reference: TrainResult
) -> None:
    result = by_reference if transport == "reference" else _run(tmp_path, {"weight_sync": transport}, _ONE_SLOT)
    _assert_trained_and_verified(result)
    # The same weights reached the engine, so it sampled the same responses and the actor took the same steps.
    assert _checksums(result) == _checksums(by_reference)
    if transport == "disk":
        published = tmp_path / "run" / WEIGHT_SYNC_DIR / "rank_0"
        assert [path.name for path in published.glob("weights-*")] == ["weights-2"]  # keeps the newest only


@pytest.mark.parametrize("transport", ["disk", "broadcast"])
def test_each_transport_into_a_rollout_server_trains(transport: str, tmp_path: Path, ray_runtime: None) -> None:
    result = _run(tmp_path, {"engine": "server", "weight_sync": transport}, _ONE_SLOT)
    _assert_trained_and_verified(result)
