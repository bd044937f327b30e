"""`PolicyLossInputs` validation: shapes, dtypes, the mask and the detached IS weights."""

from __future__ import annotations

import pytest
import torch

from rl_core import ShapeError
from rl_core.losses import PolicyLossInputs

from ._batches import DTYPE


def _tensors(size: int = 2, length: int = 3) -> dict[str, torch.Tensor]:
    return {
        "log_probs": torch.zeros(size, length, dtype=DTYPE),
        "old_log_probs": torch.zeros(size, length, dtype=DTYPE),
        "advantages": torch.zeros(size, length, dtype=DTYPE),
        "response_mask": torch.ones(size, length),
    }


def test_mask_is_a_bool_view_of_the_response_mask() -> None:
    tensors = _tensors()
    tensors["response_mask"] = torch.tensor([[1, 0, 1], [0, 0, 1]])
    inputs = PolicyLossInputs(**tensors)
    assert inputs.mask.dtype == torch.bool
    assert inputs.mask.tolist() == [[True, False, True], [False, False, True]]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("old_log_probs", torch.zeros(2, 4, dtype=DTYPE), r"old_log_probs must have shape \(B, T\) with T=3"),
        ("advantages", torch.zeros(2, 3, dtype=torch.int64), "advantages must have a floating dtype"),
        ("log_probs", torch.zeros(6, dtype=DTYPE), r"log_probs must have shape \(B, T\), got \(6,\)"),
        ("response_mask", torch.ones(3, 3), r"response_mask must have shape \(B, T\) with B=2"),
        ("response_mask", torch.full((2, 3), 2), r"response_mask must hold only 0/1 \(or bool\) values"),
        ("rollout_is_weights", torch.ones(2, 2, dtype=DTYPE), r"rollout_is_weights must have shape \(B, T\) with T=3"),
        ("rollout_log_probs", [[0.0] * 3] * 2, "rollout_log_probs must be a torch.Tensor of shape"),
    ],
)
def test_rejects_bad_tensors(name: str, value: object, message: str) -> None:
    tensors: dict[str, object] = dict(_tensors())
    tensors[name] = value
    with pytest.raises(ShapeError, match=message):
        PolicyLossInputs(**tensors)  # type: ignore[arg-type]


def test_rejects_weights_that_require_grad() -> None:
    weights = torch.ones(2, 3, dtype=DTYPE, requires_grad=True)
    with pytest.raises(
        ValueError, match=r"rollout_is_weights must not require grad; pass rollout_is_weights.detach\(\)"
    ):
        PolicyLossInputs(**_tensors(), rollout_is_weights=weights)


def test_is_frozen() -> None:
    inputs = PolicyLossInputs(**_tensors())
    with pytest.raises(AttributeError):
        inputs.advantages = torch.ones(2, 3)  # type: ignore[misc]
