"""BroadcastTransport: group reuse across syncs, rejected buckets that do not hang, and configuration."""

from __future__ import annotations

import pytest
import torch

from rl_engines.rollout import HFEngine, HFEngineConfig, UnknownParameterError
from rl_engines.sync import BroadcastTransport, SyncConfigError, WeightSync, as_buckets
from rl_engines.testing import ConformanceModels


class CountingEngine(HFEngine):
    """Counts how often the engine joins a weight group."""

    joins = 0

    def init_weights_update_group(self, spec):
        type(self).joins += 1
        return super().init_weights_update_group(spec)


def test_group_is_reused_across_syncs_and_survives_a_rejection(models: ConformanceModels) -> None:
    engine = CountingEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir)))
    sync = WeightSync([engine], BroadcastTransport(timeout_s=10.0))
    v1, v2 = models.state(1), models.state(2)
    sync.sync(as_buckets(v2.items(), 2**15), 2)
    with pytest.raises(UnknownParameterError, match="'bogus'"):
        sync.sync([[("lm_head.weight", v1["lm_head.weight"]), ("bogus", torch.ones(2))]], 9)
    sync.sync(as_buckets(v1.items(), 2**15), 1)
    assert CountingEngine.joins == 1
    assert engine.weights_checksum() == models.checksum(v1) and engine.weight_version() == 1
    sync.close()
    assert engine._group is None


def test_two_engines_share_one_group(models: ConformanceModels) -> None:
    engines = [HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir))) for _ in range(2)]
    sync = WeightSync(engines, BroadcastTransport(timeout_s=10.0))
    sync.sync(as_buckets(models.state(2).items(), 2**15), 2)
    sync.close()
    assert all(e.weights_checksum() == models.checksum(models.state(2)) for e in engines)


def test_configuration_is_validated() -> None:
    with pytest.raises(SyncConfigError, match="backend must be 'gloo' or 'nccl'"):
        BroadcastTransport(backend="mpi")  # type: ignore[arg-type]
    with pytest.raises(SyncConfigError, match="timeout_s must be > 0"):
        BroadcastTransport(timeout_s=0)
