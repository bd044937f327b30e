"""The DAPO sections: dynamic sampling is required by the dapo pipeline, the overlong ramp fits the budget."""

from __future__ import annotations

from typing import Any

import pytest

from rl_runtime.config import ConfigError, DynamicSamplingConfig, OverlongConfig, RunConfig, config_from_dict


def _config(**sections: Any) -> RunConfig:
    data = {"data": {"train_files": ["t.jsonl"], "max_response_length": 16}, "actor": {"model": {"path": "m"}}}
    return config_from_dict(RunConfig, {**data, **sections})


def test_dapo_pipeline_needs_dynamic_sampling_settings() -> None:
    with pytest.raises(ConfigError, match=r"algorithm\.dynamic_sampling.*filters groups"):
        _config(pipeline="dapo")
    config = _config(pipeline="dapo", algorithm={"dynamic_sampling": {"max_draws": 3}})
    assert config.algorithm.dynamic_sampling == DynamicSamplingConfig(epsilon=0.0, max_draws=3)


def test_overlong_ramp_must_fit_the_response_budget() -> None:
    with pytest.raises(ConfigError, match=r"algorithm\.overlong\.buffer_length.*max_response_length=16"):
        _config(algorithm={"overlong": {"buffer_length": 17}})
    assert _config(algorithm={"overlong": {"buffer_length": 4}}).algorithm.overlong == OverlongConfig(4, 1.0)


def test_dynamic_sampling_rejects_a_zero_draw_budget() -> None:
    with pytest.raises(ConfigError, match="max_draws"):
        _config(algorithm={"dynamic_sampling": {"max_draws": 0}})


def test_step_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="step_timeout_s"):
        _config(trainer={"step_timeout_s": 0})
