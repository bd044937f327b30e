"""`algorithm.policy_loss=auto` (the default): the loss it resolves to per staleness and correction, the run log's
line and warning, and the bad values refused when the config loads."""

from __future__ import annotations

from typing import Any

import pytest

from rl_runtime.config import ConfigError, RunConfig, config_from_dict, resolve_policy_loss
from rl_runtime.config._schema_async import describe_policy_loss, stale_loss_warning

SPLIT = ["placement.slots=2", "placement.colocate=false"]
TIS = "algorithm.rollout_correction={mode: tis}"


def _config(data: dict[str, Any], overrides: list[str]) -> RunConfig:
    return config_from_dict(RunConfig, data, overrides)


@pytest.mark.parametrize(
    ("overrides", "given", "resolved"),
    [
        ([], "auto", "ppo"),  # synchronous: the loss every synchronous figure was measured with
        ([*SPLIT, "algorithm.max_staleness=0"], "auto", "ppo"),
        ([*SPLIT, "algorithm.max_staleness=1"], "auto", "decoupled_ppo"),
        ([*SPLIT, "algorithm.max_staleness=2"], "auto", "decoupled_ppo"),
        ([*SPLIT, "algorithm.max_staleness=1", TIS], "auto", "ppo"),  # the correction weights the stale samples
        ([TIS], "auto", "ppo"),
        ([*SPLIT, "algorithm.max_staleness=1", "algorithm.policy_loss=ppo"], "ppo", "ppo"),
        (["algorithm.policy_loss=decoupled_ppo"], "decoupled_ppo", "decoupled_ppo"),
        ([*SPLIT, "algorithm.max_staleness=1", "algorithm.policy_loss=gspo"], "gspo", "gspo"),
    ],
)
def test_auto_resolves_from_the_staleness_and_the_correction(
    minimal_data: dict[str, Any], overrides: list[str], given: str, resolved: str
) -> None:
    config = _config(minimal_data, overrides)
    assert (config.algorithm.policy_loss, resolve_policy_loss(config.algorithm)) == (given, resolved)


def test_the_run_log_names_the_loss_and_why(minimal_data: dict[str, Any]) -> None:
    lines = {
        "sync": describe_policy_loss(_config(minimal_data, [])),
        "eta1": describe_policy_loss(_config(minimal_data, [*SPLIT, "algorithm.max_staleness=1"])),
        "tis": describe_policy_loss(_config(minimal_data, [*SPLIT, "algorithm.max_staleness=1", TIS])),
        "explicit": describe_policy_loss(_config(minimal_data, ["algorithm.policy_loss=gspo"])),
    }
    assert lines == {
        "sync": "policy loss: ppo (algorithm.policy_loss=auto: algorithm.max_staleness=0, synchronous)",
        "eta1": "policy loss: decoupled_ppo (algorithm.policy_loss=auto: algorithm.max_staleness=1 with no "
        "algorithm.rollout_correction)",
        "tis": "policy loss: ppo (algorithm.policy_loss=auto: algorithm.rollout_correction weights the stale samples)",
        "explicit": "policy loss: gspo (algorithm.policy_loss)",
    }


@pytest.mark.parametrize(
    ("overrides", "warned"),
    [
        ([*SPLIT, "algorithm.max_staleness=1", "algorithm.policy_loss=ppo"], True),
        ([*SPLIT, "algorithm.max_staleness=2", "algorithm.policy_loss=cispo"], True),
        ([*SPLIT, "algorithm.max_staleness=1"], False),
        ([*SPLIT, "algorithm.max_staleness=1", "algorithm.policy_loss=ppo", TIS], False),
        (["algorithm.policy_loss=ppo"], False),
    ],
)
def test_an_explicit_uncorrected_loss_under_staleness_runs_with_a_warning_naming_the_field(
    minimal_data: dict[str, Any], overrides: list[str], warned: bool
) -> None:
    warning = stale_loss_warning(_config(minimal_data, overrides))
    if warned:
        assert warning is not None
        assert warning.startswith("algorithm.policy_loss=") and "algorithm.max_staleness=" in warning
        assert "set algorithm.policy_loss=auto (runs decoupled_ppo here)" in warning
    else:
        assert warning is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["algorithm.policy_loss=atuo"],
            r"algorithm.policy_loss: expected a registered policy loss \(auto, .*decoupled_ppo.*\), found 'atuo'.*"
            r"did you mean 'auto'\?",
        ),
        (
            ["algorithm.policy_loss_params={behav_imp_weight_cap: 2.0}"],
            r"algorithm.policy_loss_params.behav_imp_weight_cap: expected a parameter of policy loss 'ppo' \(what "
            r"policy_loss='auto' runs here\) \(.*clip_ratio.*\), found an unknown key",
        ),
        (
            [*SPLIT, "algorithm.max_staleness=1", "algorithm.policy_loss_params={behav_imp_weight_cap: true}"],
            r"algorithm.policy_loss_params.behav_imp_weight_cap: expected a value like its default 5.0",
        ),
        (
            # Accepted by name and type, refused by the loss itself: caught at load, not at the first update.
            [*SPLIT, "algorithm.max_staleness=1", "algorithm.policy_loss_params={behav_imp_weight_cap: 0.5}"],
            r"algorithm.policy_loss_params: expected parameters policy loss 'decoupled_ppo' accepts, found "
            r"\{'behav_imp_weight_cap': 0.5\}.*behav_imp_weight_cap must be > 1",
        ),
        (
            ["algorithm.policy_loss_params={clip_ratio_c: 0.9}"],
            r"algorithm.policy_loss_params: expected parameters policy loss 'ppo' accepts.*clip_ratio_c must be > 1",
        ),
        (
            [*SPLIT, "algorithm.max_staleness=1", "algorithm.policy_loss=decoupled_ppo", TIS],
            r"algorithm.rollout_correction: expected null with algorithm.policy_loss=decoupled_ppo",
        ),
    ],
)
def test_bad_values_are_refused_at_load_naming_the_field(
    minimal_data: dict[str, Any], overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(minimal_data, overrides)


def test_params_are_checked_against_the_loss_auto_runs(minimal_data: dict[str, Any]) -> None:
    # decoupled_ppo takes behav_imp_weight_cap, so auto accepts it where it runs decoupled_ppo.
    params = "algorithm.policy_loss_params={clip_ratio: 0.2, behav_imp_weight_cap: 2.0}"
    config = _config(minimal_data, [*SPLIT, "algorithm.max_staleness=1", params])
    assert config.algorithm.policy_loss_params == {"clip_ratio": 0.2, "behav_imp_weight_cap": 2.0}
