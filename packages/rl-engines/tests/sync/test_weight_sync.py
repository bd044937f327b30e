"""The sync protocol's order, verification, failure handling and timeouts, with a recording fake engine."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
import torch

from rl_engines.rollout import HFEngine, HFEngineConfig, UnknownParameterError, weights_checksum
from rl_engines.sync import (
    ReferenceTransport,
    SharedMemoryTransport,
    SyncConfigError,
    SyncError,
    SyncTimeoutError,
    WeightSync,
    WeightSyncConfig,
    as_buckets,
)
from rl_engines.testing import ConformanceModels


class RecordingEngine:
    """Stores what it is sent and logs every protocol call; knobs make it misbehave."""

    capabilities = frozenset({"tensor"})
    logprob_mode = "temperature"

    def __init__(self, *, lie_checksum: bool = False, ignore_version: bool = False, hang_s: float = 0.0) -> None:
        self.calls: list[str] = []
        self.threads: set[str] = set()
        self.tensors: dict[str, torch.Tensor] = {}
        self.version = 0
        self.lie_checksum, self.ignore_version, self.hang_s = lie_checksum, ignore_version, hang_s

    def pause(self, mode: str = "abort", *, timeout_s: float | None = None) -> None:
        self.calls.append(f"pause:{mode}")
        self.threads.add(threading.current_thread().name)

    def update_weights_from_tensors(self, tensors: list) -> None:
        self.calls.append("update")
        self.threads.add(threading.current_thread().name)
        time.sleep(self.hang_s)
        if any(name.startswith("bad") for name, _ in tensors):
            raise UnknownParameterError("no such tensor")
        self.tensors.update({name: t.clone() for name, t in tensors})

    def flush_cache(self) -> None:
        self.calls.append("flush")

    def set_weight_version(self, version: int) -> None:
        self.calls.append("version")
        if not self.ignore_version:
            self.version = version

    def weight_version(self) -> int:
        self.calls.append("get_version")
        return self.version

    def weights_checksum(self, names: list[str] | None = None) -> str:
        self.calls.append("checksum")
        named = [(n, self.tensors[n] + (1 if self.lie_checksum else 0)) for n in names or sorted(self.tensors)]
        return weights_checksum(named)

    def resume(self) -> None:
        self.calls.append("resume")


def _buckets() -> list[list[tuple[str, torch.Tensor]]]:
    return [[("a", torch.ones(3)), ("b", torch.arange(4.0))], [("c", torch.zeros(2, 2))]]


def test_protocol_order_and_report() -> None:
    engine = RecordingEngine()
    report = WeightSync([engine], ReferenceTransport()).sync(_buckets(), 7)
    assert engine.calls == [
        "pause:abort", "update", "update", "flush", "version", "get_version", "checksum", "resume",
    ]  # fmt: skip
    assert (report.version, report.tensors, report.buckets, report.nbytes) == (7, 3, 2, 4 * (3 + 4 + 4))
    assert report.checksum == weights_checksum(pair for bucket in _buckets() for pair in bucket)
    assert set(report.seconds) >= {"pause", "send", "flush", "version", "verify", "resume"}


class SleepingEngine(RecordingEngine):
    """A `RecordingEngine` that can sleep and refuses weights while asleep, as a colocated rollout engine does."""

    capabilities = frozenset({"tensor", "sleep"})

    def __init__(self, *, asleep: bool) -> None:
        super().__init__()
        self.asleep = asleep

    def status(self) -> SimpleNamespace:
        self.calls.append("status")
        return SimpleNamespace(state="asleep" if self.asleep else "serving")

    def wake_up(self, tags: object = None) -> None:
        self.calls.append("wake_up")
        self.asleep = False

    def update_weights_from_tensors(self, tensors: list) -> None:
        if self.asleep:
            raise AssertionError("weights sent to an asleep engine")
        super().update_weights_from_tensors(tensors)


@pytest.mark.parametrize("asleep", [True, False])
def test_an_asleep_engine_is_woken_before_the_update(asleep: bool) -> None:
    engine = SleepingEngine(asleep=asleep)
    report = WeightSync([engine], ReferenceTransport()).sync(_buckets(), 3)
    woken = ["wake_up"] if asleep else []
    assert engine.calls[: 2 + len(woken)] == ["status", *woken, "pause:abort"]
    assert engine.version == 3 and "wake" in report.seconds


def test_checksum_mismatch_raises_and_leaves_the_engine_paused() -> None:
    engine = RecordingEngine(lie_checksum=True)
    with pytest.raises(SyncError, match=r"stale or partial weights.*stay paused"):
        WeightSync([engine], ReferenceTransport()).sync(_buckets(), 1)
    assert "resume" not in engine.calls


def test_ignored_version_raises() -> None:
    engine = RecordingEngine(ignore_version=True)
    with pytest.raises(SyncError, match="reports weight version 0 after a sync of 1;"):
        WeightSync([engine], ReferenceTransport()).sync(_buckets(), 1)


def test_engine_rejection_propagates_and_the_engine_resumes() -> None:
    engine = RecordingEngine()
    with pytest.raises(UnknownParameterError, match="no such tensor"):
        WeightSync([engine], ReferenceTransport()).sync([[("bad", torch.ones(1))]], 1)
    assert engine.calls[-1] == "resume" and "version" not in engine.calls


def test_a_hung_engine_call_times_out() -> None:
    engine = RecordingEngine(hang_s=2.0)
    sync = WeightSync([engine], ReferenceTransport(), WeightSyncConfig(timeout_s=0.2))
    with pytest.raises(SyncTimeoutError, match=r"update_weights_from_tensors on engine 0 did not return within 0.2 s"):
        sync.sync(_buckets(), 1)


def test_engine_calls_run_on_workers_unless_inline() -> None:
    on_workers, inline = RecordingEngine(), RecordingEngine()
    WeightSync([on_workers], ReferenceTransport()).sync(_buckets(), 1)
    WeightSync([inline], ReferenceTransport(), WeightSyncConfig(inline_calls=True)).sync(_buckets(), 1)
    assert all(name.startswith("weight-sync") for name in on_workers.threads)
    assert inline.threads == {threading.current_thread().name}
    assert inline.calls == on_workers.calls


def test_an_inline_call_past_its_bound_is_reported_when_it_returns() -> None:
    engine = RecordingEngine(hang_s=0.3)
    sync = WeightSync([engine], ReferenceTransport(), WeightSyncConfig(timeout_s=0.2, inline_calls=True))
    with pytest.raises(
        SyncTimeoutError,
        match=r"update_weights_from_tensors on engine 0 returned after \d+\.\d s, past its 0.2 s bound",
    ):
        sync.sync(_buckets(), 1)
    assert engine.calls[-1] == "resume"


def test_an_inline_engine_rejection_propagates_and_the_engine_resumes() -> None:
    engine = RecordingEngine()
    sync = WeightSync([engine], ReferenceTransport(), WeightSyncConfig(inline_calls=True))
    with pytest.raises(UnknownParameterError, match="no such tensor"):
        sync.sync([[("bad", torch.ones(1))]], 1)
    assert engine.calls[-1] == "resume" and "version" not in engine.calls


def test_input_rejections() -> None:
    sync = WeightSync([RecordingEngine()], ReferenceTransport())
    with pytest.raises(SyncConfigError, match="bucket iterable was empty"):
        sync.sync([], 1)
    with pytest.raises(SyncError, match="'a' was exported twice"):
        sync.sync([[("a", torch.ones(1))], [("a", torch.ones(1))]], 1)
    with pytest.raises(SyncConfigError, match="the policy version, an int >= 0, got '1'"):
        sync.sync(_buckets(), "1")
    with pytest.raises(SyncConfigError, match="lacks capability 'disk' needed by the disk transport"):
        from rl_engines.sync import DiskTransport

        WeightSync([RecordingEngine()], DiskTransport("/tmp/unused"))
    with pytest.raises(SyncConfigError, match="at least one engine"):
        WeightSync([], ReferenceTransport())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"pause_mode": "later"}, "pause_mode must be one of"), ({"timeout_s": 0}, "timeout_s must be > 0"),
     ({"dtype": "half-ish"}, "unknown dtype")],
)  # fmt: skip
def test_config_rejects(kwargs: dict, match: str) -> None:
    with pytest.raises(SyncConfigError, match=match):
        WeightSyncConfig(**kwargs)


def test_dtype_must_match_what_the_engine_stores(models: ConformanceModels) -> None:
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir), dtype="bfloat16"))
    state = models.state(2)
    with pytest.raises(SyncError, match="stores another dtype than sent"):
        WeightSync([engine], ReferenceTransport()).sync(as_buckets(state.items(), 2**16), 2)
    engine.resume()
    sync = WeightSync([engine], ReferenceTransport(), WeightSyncConfig(dtype="bfloat16"))
    report = sync.sync(as_buckets(state.items(), 2**16), 2)
    assert report.checksum == weights_checksum((n, t.bfloat16()) for n, t in state.items())


def test_two_engines_over_shared_memory(models: ConformanceModels) -> None:
    engines = [HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir))) for _ in range(2)]
    state = models.state(2)
    sync = WeightSync(engines, SharedMemoryTransport())
    sync.sync(as_buckets(state.items(), 2**15), 2)
    sync.close()
    assert all(e.weights_checksum() == models.checksum(state) and e.weight_version() == 2 for e in engines)


def test_verify_off_skips_the_checks() -> None:
    engine = RecordingEngine(lie_checksum=True)
    report = WeightSync([engine], ReferenceTransport(), WeightSyncConfig(verify=False)).sync(_buckets(), 1)
    assert report.checksum is None and "checksum" not in engine.calls and engine.calls[-1] == "resume"


def test_as_buckets_groups_by_bytes() -> None:
    named = [("a", torch.ones(4)), ("b", torch.ones(4)), ("big", torch.ones(100)), ("c", torch.ones(1))]
    assert [[n for n, _ in b] for b in as_buckets(named, 32)] == [["a", "b"], ["big"], ["c"]]
    with pytest.raises(SyncConfigError, match="bucket_bytes must be >= 1"):
        list(as_buckets(named, 0))
