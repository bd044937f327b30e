"""Fixtures shared by the rollout and sync tests: the tiny v1/v2 models and a fresh HFEngine on v1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rl_engines.rollout import HFEngine, HFEngineConfig
from rl_engines.testing import ConformanceModels


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> ConformanceModels:
    return ConformanceModels.create(tmp_path_factory.mktemp("models"))


@pytest.fixture
def engine(models: ConformanceModels) -> Iterator[HFEngine]:
    config = HFEngineConfig(
        model_path=str(models.v1_dir),
        initial_version=1,
        prefill_cache_size=2,
        admission_timeout_s=5.0,
        drain_timeout_s=5.0,
        seed=0,
    )
    engine = HFEngine.from_config(config)
    yield engine
    engine.shutdown()
