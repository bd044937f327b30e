"""HFEngine passes the InferenceEngine conformance suite (every transport, pause modes, sleep levels)."""

from __future__ import annotations

import pytest

from rl_engines.rollout import HFEngine, HFEngineConfig, InferenceEngine
from rl_engines.testing import ConformanceModels, InferenceEngineConformance, ProcessEngine

STEP_DELAY_S = 0.002
"""Slows the child's decoding so a long request stays in flight while the lifecycle checks pause or abort it."""


class TestHFEngineConformance(InferenceEngineConformance):
    def make_engine(self, models: ConformanceModels) -> InferenceEngine:
        config = HFEngineConfig(
            model_path=str(models.v1_dir),
            initial_version=1,
            prefill_cache_size=4,
            admission_timeout_s=30.0,
            drain_timeout_s=30.0,
        )
        return HFEngine.from_config(config)


@pytest.mark.slow
class TestProcessEngineConformance(InferenceEngineConformance):
    """The same suite across a process boundary: shared-memory handles and the broadcast group span processes."""

    def make_engine(self, models: ConformanceModels) -> InferenceEngine:
        config = HFEngineConfig(
            model_path=str(models.v1_dir), initial_version=1, admission_timeout_s=30.0, drain_timeout_s=30.0
        )
        return ProcessEngine(config, step_delay_s=STEP_DELAY_S)
