"""AdvantageInputs validation (every rejection path) and the AdvantageOutput pair."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rl_core import ShapeError
from rl_core.advantages import AdvantageInputs, AdvantageOutput

B, T = 3, 4


def _inputs(**overrides: object) -> AdvantageInputs:
    fields: dict[str, object] = {
        "token_level_rewards": torch.zeros(B, T),
        "response_mask": torch.ones(B, T, dtype=torch.int64),
        "group_ids": torch.tensor([0, 0, 1]),
    }
    fields.update(overrides)
    return AdvantageInputs(**fields)  # type: ignore[arg-type]


def test_valid_inputs_expose_a_bool_mask() -> None:
    inputs = _inputs(response_mask=torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]))
    assert inputs.mask.dtype == torch.bool
    assert inputs.mask.tolist() == [[True, True, False, False], [True, False, False, False], [False] * 4]


def test_optional_inputs_are_kept() -> None:
    values, baselines = torch.ones(B, T), torch.ones(B)
    inputs = _inputs(values=values, baseline_rewards=baselines)
    assert inputs.values is values
    assert inputs.baseline_rewards is baselines


def test_inputs_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _inputs().values = torch.ones(B, T)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"token_level_rewards": [[0.0] * T] * B}, r"token_level_rewards must be a torch.Tensor of shape \(B, T\)"),
        ({"token_level_rewards": torch.zeros(B)}, r"token_level_rewards must have shape \(B, T\), got \(3,\)"),
        ({"token_level_rewards": torch.zeros(B, T, dtype=torch.int64)}, "token_level_rewards must have a floating"),
        ({"response_mask": torch.ones(B, T + 1)}, r"response_mask must have shape \(B, T\) with T=4"),
        ({"response_mask": torch.full((B, T), 2)}, "response_mask must hold only 0/1"),
        ({"group_ids": torch.tensor([0, 1])}, r"group_ids must have shape \(B\) with B=3"),
        (
            {"group_ids": torch.zeros(B)},
            "group_ids must have dtype torch.int8, .*torch.int64, torch.uint8, got torch.float32",
        ),
        ({"group_ids": torch.zeros(B, dtype=torch.bool)}, "group_ids must have dtype .* got torch.bool"),
        ({"values": torch.zeros(B, T - 1)}, r"values must have shape \(B, T\) with T=4"),
        ({"values": torch.zeros(B, T, dtype=torch.int32)}, "values must have a floating dtype"),
        ({"baseline_rewards": torch.zeros(B, 1)}, r"baseline_rewards must have shape \(B\), got \(3, 1\)"),
        ({"baseline_rewards": torch.zeros(B + 1)}, r"baseline_rewards must have shape \(B\) with B=3"),
        ({"baseline_rewards": torch.zeros(B, dtype=torch.int64)}, "baseline_rewards must have a floating dtype"),
        ({"group_ids": torch.zeros(B, dtype=torch.int64, device="meta")}, "tensors must share one device"),
    ],
)
def test_bad_inputs_are_rejected_naming_the_argument(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        _inputs(**overrides)


@pytest.mark.parametrize("name", ["values", "baseline_rewards"])
def test_require_names_the_missing_input_and_the_estimator(name: str) -> None:
    with pytest.raises(
        ValueError, match=f"advantage estimator 'demo' needs {name}: build AdvantageInputs with {name}="
    ):
        _inputs().require(name, "demo")


def test_require_returns_a_present_input() -> None:
    values = torch.ones(B, T)
    assert _inputs(values=values).require("values", "gae") is values


def test_output_is_a_named_pair() -> None:
    advantages, returns = torch.ones(1, 2), torch.zeros(1, 2)
    output = AdvantageOutput(advantages, returns)
    assert output.advantages is advantages
    assert output.returns is returns
    assert tuple(output) == (advantages, returns)
