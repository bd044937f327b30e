"""`FSDPEngine` is a `TrainEngine` (the seam the roles in rl-runtime use), and publishes its own weights through
the sync it is connected to (`connect_weight_sync`, `update_weights`: AReaL's `connect_engine` /
`update_weights`)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
import torch
from _training_helpers import engine_config

from rl_engines import EngineError
from rl_engines.sync import Bucket, SyncReport, WeightPublisher
from rl_engines.training import FSDPEngine, TrainConfigError, TrainEngine


def test_fsdp_engine_satisfies_the_protocol() -> None:
    assert isinstance(FSDPEngine.from_config(engine_config()), TrainEngine)


class _Recorder:
    """A `WeightPublisher` double: keeps every bucket it is handed and reports what it took."""

    def __init__(self) -> None:
        self.buckets: list[Bucket] = []
        self.closed = 0

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        self.buckets = list(buckets)
        count = sum(len(bucket) for bucket in self.buckets)
        return SyncReport(version, count, len(self.buckets), sum(t.nbytes for b in self.buckets for _, t in b), None)

    def close(self) -> None:
        self.closed += 1


def test_update_weights_sends_the_export_in_the_connected_bucket_size() -> None:
    engine = FSDPEngine.from_config(engine_config())
    recorder = _Recorder()
    publisher: WeightPublisher = recorder
    engine.connect_weight_sync(publisher, bucket_bytes=4096)
    report = engine.update_weights(7)
    exported = {name: tensor for bucket in engine.export_weights(4096) for name, tensor in bucket}
    sent = {name: tensor for bucket in recorder.buckets for name, tensor in bucket}
    assert (report.version, report.tensors) == (7, len(exported))
    assert sent.keys() == exported.keys() and all(torch.equal(sent[name], exported[name]) for name in sent)
    assert report.buckets == len(list(engine.export_weights(4096))) > 1  # the size it was connected with
    engine.close_weight_sync()
    engine.close_weight_sync()  # a second close finds nothing connected
    assert recorder.closed == 1


def test_publishing_without_a_connected_sync_or_with_a_bad_bucket_size_is_refused() -> None:
    engine = FSDPEngine.from_config(engine_config())
    with pytest.raises(EngineError, match=r"no weight sync is connected; connect one first with connect_weight_sync"):
        engine.update_weights(1)
    with pytest.raises(TrainConfigError, match=r"connect_weight_sync: bucket_bytes must be an int > 0, got 0") as error:
        engine.connect_weight_sync(_Recorder(), bucket_bytes=0)
    assert error.value.field == "bucket_bytes"
