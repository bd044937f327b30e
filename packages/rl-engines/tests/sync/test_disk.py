"""DiskTransport: the published layout, atomic replacement, pruning, and engines loading it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rl_engines.rollout import HFEngine, weights_checksum
from rl_engines.sync import (
    INDEX_FILE,
    LATEST_FILE,
    DiskTransport,
    SyncConfigError,
    WeightSync,
    as_buckets,
    read_manifest,
)
from rl_engines.testing import ConformanceModels


def _sync(engine: HFEngine, root: Path, state: dict, version: int, keep_last: int = 2) -> Path:
    transport = DiskTransport(root, keep_last=keep_last)
    WeightSync([engine], transport).sync(as_buckets(state.items(), 2**15), version)
    assert transport.last_path is not None
    return transport.last_path


def test_published_layout(engine: HFEngine, models: ConformanceModels, tmp_path: Path) -> None:
    state = models.state(2)
    path = _sync(engine, tmp_path, state, 2)
    assert path == tmp_path / "weights-2" and (tmp_path / LATEST_FILE).read_text().strip() == "weights-2"
    index = json.loads((path / INDEX_FILE).read_text())
    assert set(index["weight_map"]) == set(state) and len(set(index["weight_map"].values())) > 1
    manifest = read_manifest(path)
    assert manifest["version"] == 2 and sorted(t["name"] for t in manifest["tensors"]) == sorted(state)
    on_disk = {k: v for f in sorted(path.glob("*.safetensors")) for k, v in load_file(str(f)).items()}
    assert weights_checksum(on_disk.items()) == models.checksum(state) == engine.weights_checksum()
    assert not list(tmp_path.glob(".staging-*"))


def test_pruning_and_same_version_replacement(engine: HFEngine, models: ConformanceModels, tmp_path: Path) -> None:
    v1, v2 = models.state(1), models.state(2)
    for version in (3, 4, 5):
        _sync(engine, tmp_path, v1, version, keep_last=2)
    assert sorted(p.name for p in tmp_path.glob("weights-*")) == ["weights-4", "weights-5"]
    _sync(engine, tmp_path, v2, 5, keep_last=2)
    assert read_manifest(tmp_path / "weights-5")["version"] == 5
    assert engine.weights_checksum() == models.checksum(v2)


def test_directory_named_by_the_version_and_shared_storage(
    engine: HFEngine, models: ConformanceModels, tmp_path: Path
) -> None:
    state = models.state(2)
    tied = state["model.norm.weight"]
    buckets = [[("model.norm.weight", tied), ("model.layers.0.input_layernorm.weight", tied)]]
    transport = DiskTransport(tmp_path)
    WeightSync([engine], transport).sync(buckets, 3)
    assert transport.last_path == tmp_path / "weights-3"
    assert engine.weight_version() == 3


def test_failed_load_removes_nothing_published(engine: HFEngine, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="which the model does not have"):
        WeightSync([engine], DiskTransport(tmp_path)).sync([[("nope", torch.ones(2))]], 9)
    assert engine.weight_version() == 1 and engine.status().state == "serving"


def test_keep_last_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(SyncConfigError, match="keep_last must be >= 1"):
        DiskTransport(tmp_path, keep_last=0)
