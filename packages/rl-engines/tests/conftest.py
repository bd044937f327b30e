"""Fixtures shared by the rollout and sync tests: the tiny v1/v2 models and a fresh HFEngine on v1."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rl_engines.rollout import HFEngine, HFEngineConfig
from rl_engines.testing import ConformanceModels

TEST_DEVICE = os.environ.get("RL_ENGINES_TEST_DEVICE", "cpu")
"""Where the fixture engine runs: `cpu`, or `cuda` to run the rollout conformance tests on a GPU."""
WAIT_S = 30.0
"""The fixture engine's admission and drain bounds: waits that end when another call finishes, so only a failing
run reaches them (5 s was a margin a loaded machine could eat); tests of the timeouts build their own engine."""


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> ConformanceModels:
    return ConformanceModels.create(tmp_path_factory.mktemp("models"))


@pytest.fixture
def engine(models: ConformanceModels) -> Iterator[HFEngine]:
    config = HFEngineConfig(
        model_path=str(models.v1_dir),
        initial_version=1,
        prefill_cache_size=2,
        admission_timeout_s=WAIT_S,
        drain_timeout_s=WAIT_S,
        seed=0,
        device=TEST_DEVICE,
    )
    engine = HFEngine.from_config(config)
    yield engine
    engine.shutdown()
