"""check_env_config: the counts and timeout every env runs with, checked before any env is built."""

from __future__ import annotations

import pytest

from rl_core.envs import EnvConfig, EnvConfigError, check_env_config, make_env


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_envs", 0, r"env.num_envs must be >= 1, got 0; set env.num_envs to a positive int"),
        ("max_steps", 0, r"env.max_steps must be >= 1, got 0"),
        ("num_trials", 0, r"env.num_trials must be >= 1, got 0"),
        ("num_workers", -1, r"env.num_workers must be >= 0 \(0 = in-process\), got -1"),
        ("step_timeout_s", 0.0, r"env.step_timeout_s must be > 0, got 0.0"),
    ],
)
def test_a_count_or_timeout_no_env_runs_with_is_named(field: str, value: float, message: str) -> None:
    config = EnvConfig(**{field: value})  # pyright: ignore[reportArgumentType]
    with pytest.raises(EnvConfigError, match=message) as raised:
        check_env_config(config)
    assert raised.value.field == field
    with pytest.raises(EnvConfigError, match=message):  # make_env checks first, whatever the name
        make_env(config)


def test_the_smallest_accepted_values_pass() -> None:
    check_env_config(EnvConfig(num_envs=1, max_steps=1, num_trials=1, num_workers=0, step_timeout_s=0.1))
