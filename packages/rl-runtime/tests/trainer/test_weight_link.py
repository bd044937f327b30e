"""Split placement's weight link in one process (sender and receiver on two threads over a real gloo weight group):
what arrives equals what was sent, exactly, and every mismatch is refused."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from rl_engines.rollout import HFEngine, HFEngineConfig, weights_checksum
from rl_engines.sync import Bucket, SyncError, SyncReport, as_buckets
from rl_runtime.nodes import NodeResources
from rl_runtime.nodes._generate import draw_rollouts
from rl_runtime.nodes._train import checksum_metric, receive_rollout_weights, sync_rollout_weights
from rl_runtime.planning._rendezvous import FileRendezvous
from rl_runtime.trainer._engines import local_weight_sync
from rl_runtime.trainer._weight_link import (
    MESSAGE_ALIGN,
    SENDER_RANK,
    WeightReceiver,
    WeightSender,
    _receive_message,
    _send_message,
    join_weight_group,
)
from rl_runtime.workers import StepDataError

from ._task import VOCAB, tiny_config

TIMEOUT_S = 60.0
BUCKET_BYTES = 16_384
"""Small enough that the tiny model's ~90 KB of weights travel in several buckets."""


def _model(seed: int) -> torch.nn.Module:
    config = AutoConfig.for_model(
        "qwen2",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=32,
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)


def _weights(seed: int) -> dict[str, torch.Tensor]:
    return dict(_model(seed).state_dict())


def _link(tmp_path: Path, engine: HFEngine) -> tuple[WeightSender, WeightReceiver]:
    """A sender and a receiver (into `engine`) joined on one gloo weight group."""
    exchange = FileRendezvous(tmp_path / "weight_group.json")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        sender = pool.submit(join_weight_group, exchange, SENDER_RANK, 1, TIMEOUT_S)
        receiver = pool.submit(join_weight_group, exchange, 1, 1, TIMEOUT_S)
        sender_group, receiver_group = sender.result(), receiver.result()
    return WeightSender(sender_group, "float32"), WeightReceiver(receiver_group, local_weight_sync(engine, "float32"))


def _sync(sender: WeightSender, receiver: WeightReceiver, weights: dict[str, torch.Tensor], version: int):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        sent = pool.submit(sender.sync, as_buckets(weights.items(), BUCKET_BYTES), version)
        received = pool.submit(receiver.receive)
        return sent.result(TIMEOUT_S), received.result(TIMEOUT_S)


@pytest.fixture
def engine() -> Iterator[HFEngine]:
    engine = HFEngine(_model(seed=0), HFEngineConfig(dtype="float32", device="cpu"))
    yield engine
    engine.shutdown()


def test_each_sync_lands_the_sent_weights_in_the_engine_exactly(tmp_path: Path, engine: HFEngine) -> None:
    sender, receiver = _link(tmp_path, engine)
    try:
        for version, seed in ((1, 1), (2, 2)):
            weights = _weights(seed)
            sent, received = _sync(sender, receiver, weights, version)
            expected = weights_checksum(weights.items())  # an independent digest of the actor's weights
            assert sent.checksum == received.checksum == expected
            assert engine.weights_checksum(list(weights)) == expected
            assert engine.weight_version() == received.version == version
            assert sent.tensors == received.tensors == len(weights)
            assert sent.buckets == received.buckets > 1
            assert sent.nbytes == sum(t.nbytes for t in weights.values())
    finally:
        sender.close()
        receiver.close()


def test_a_sync_is_one_message_per_bucket_and_a_trailer(tmp_path: Path, engine: HFEngine) -> None:
    sender, receiver = _link(tmp_path, engine)
    group = sender._group
    assert group is not None
    calls: list[torch.Tensor] = []
    broadcast = group.broadcast

    def counted(tensor: torch.Tensor, src: int = 0) -> None:
        calls.append(tensor)
        broadcast(tensor, src)

    group.broadcast = counted  # type: ignore[method-assign]
    try:
        weights = _weights(3)
        sent, _ = _sync(sender, receiver, weights, 1)
        # each message is its lengths (int64 pair), then one uint8 buffer: 2 per bucket, 2 for the trailer
        assert len(calls) == 2 * sent.buckets + 2
        assert [c.dtype for c in calls] == [torch.int64, torch.uint8] * (sent.buckets + 1)
        assert engine.weights_checksum(list(weights)) == weights_checksum(weights.items())
    finally:
        sender.close()
        receiver.close()


def test_a_message_carries_every_dtype_and_shape_bit_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    tensors = [
        torch.randn(3, 5).to(torch.bfloat16),
        torch.arange(7, dtype=torch.int64) - 3,
        torch.tensor([True, False, True, True]),
        torch.tensor(2.5),  # a scalar
        torch.zeros(0, 3),  # no elements
        torch.randn(1).to(torch.float16),
        torch.randn(4, 6).t(),  # not contiguous
    ]
    header = {"version": 9, "names": [f"t{i}" for i in range(len(tensors))]}
    header |= {
        "dtypes": [str(t.dtype).removeprefix("torch.") for t in tensors],
        "shapes": [list(t.shape) for t in tensors],
    }
    exchange = FileRendezvous(tmp_path / "weight_group.json")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        sender_group = pool.submit(join_weight_group, exchange, SENDER_RANK, 1, TIMEOUT_S)
        receiver_group = pool.submit(join_weight_group, exchange, 1, 1, TIMEOUT_S)
        groups = sender_group.result(), receiver_group.result()
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            sent = pool.submit(_send_message, groups[0], header, tensors)
            received = pool.submit(_receive_message, groups[1])
            as_sent, (got_header, got) = sent.result(TIMEOUT_S), received.result(TIMEOUT_S)
    finally:
        for group in groups:
            group.close()
    assert got_header == header
    for original, on_wire, arrived in zip(tensors, as_sent, got, strict=True):
        assert arrived.dtype == original.dtype and arrived.shape == original.shape
        assert torch.equal(arrived, original) and torch.equal(on_wire, original)
        assert arrived.data_ptr() % MESSAGE_ALIGN == got[0].data_ptr() % MESSAGE_ALIGN  # aligned alike in the buffer


def test_a_training_rank_that_does_not_send_still_drains_the_collective_export() -> None:
    taken: list[int] = []

    def export() -> Iterator[Bucket]:
        for index in range(3):
            taken.append(index)
            yield [(f"w{index}", torch.zeros(2))]

    report = WeightSender(None, "float32").sync(export(), 4)
    assert taken == [0, 1, 2]
    assert (report.version, report.tensors, report.checksum) == (4, 0, None)


class _CorruptingSync:
    """Stands in for the receiver's local WeightSync: takes every bucket, then reports another checksum."""

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        count = sum(len(bucket) for bucket in buckets)
        return SyncReport(version, count, 1, 0, "0" * 64)

    def close(self) -> None:
        """Nothing held."""


def test_a_received_checksum_other_than_the_senders_is_refused(tmp_path: Path, engine: HFEngine) -> None:
    sender, receiver = _link(tmp_path, engine)
    receiver._sync.close()
    receiver._sync = _CorruptingSync()  # type: ignore[assignment]
    try:
        with pytest.raises(SyncError, match=r"weight version 1: the rollout engine holds checksum 0{64}, .*corrupted"):
            _sync(sender, receiver, _weights(1), 1)
    finally:
        sender.close()
        receiver.close()


class _Arrives:
    """A weight receiver that reports `version` arriving."""

    def __init__(self, version: int) -> None:
        self.version = version

    def receive(self) -> SyncReport:
        return SyncReport(self.version, 1, 1, 4, "00000000000ff" + "0" * 51)

    def close(self) -> None:
        """Nothing held."""


def _resources(tmp_path: Path, receiver: _Arrives | None = None) -> NodeResources:
    # Only the fields these functions read; the engines they must refuse to run without are None.
    return NodeResources(tiny_config(tmp_path), None, None, None, None, None, weight_receiver=receiver)


def test_the_rollout_slot_records_the_version_and_checksum_it_received(tmp_path: Path) -> None:
    res = _resources(tmp_path, _Arrives(3))
    assert receive_rollout_weights(res, 3) == {"rollout/weight_version": 3.0, "rollout/weights_checksum": 255.0}
    assert res.policy_version == 3


def test_checksum_metrics_keep_52_bits_exactly() -> None:
    assert checksum_metric("f" * 64) == float(2**52 - 1)
    assert checksum_metric("0000000000001" + "f" * 51) == 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda res: receive_rollout_weights(res, 1),
            r"the rollout slot expected weight version 1 but the training slots sent 5; the two sides ran a "
            r"different number of actor updates",
        ),
        (
            lambda res: receive_rollout_weights(NodeResources(res.config, None, None, None, None, None), 1),
            r"this worker has no weight receiver; receive_weights runs on the rollout slots of a split placement",
        ),
        (
            lambda res: sync_rollout_weights(res, 1),
            r"this worker holds no actor to publish weights from; the actor runs on the training slots",
        ),
        (
            lambda res: draw_rollouts(res, step=0, rank=0, draw=0),
            r"this worker holds no rollout engine or prompt loader: under placement.colocate=false only the rollout "
            r"slots sample",
        ),
    ],
)
def test_a_slot_without_the_engine_or_out_of_step_refuses(tmp_path: Path, call, message: str) -> None:
    res = _resources(tmp_path, _Arrives(5))
    with pytest.raises(StepDataError, match=message):
        call(res)


def test_the_in_process_engine_is_synced_on_the_trainer_thread(engine: HFEngine) -> None:
    # HFEngine bounds its own waits, so its calls skip the worker threads that enforce deadlines on other engines.
    assert "bounded_calls" in engine.capabilities
    assert local_weight_sync(engine, "float32").config.inline_calls


class _UnboundedEngine:
    """Test double: an engine that declares every capability except bounded calls."""

    capabilities = HFEngine.capabilities - {"bounded_calls"}


def test_an_engine_that_does_not_bound_its_calls_is_synced_through_watchdog_threads() -> None:
    assert not local_weight_sync(_UnboundedEngine(), "float32").config.inline_calls
