"""Sequence scores placed on the last response token."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError
from rl_core.shaping import scores_to_token_level


def test_score_sits_on_the_last_response_token_by_hand() -> None:
    scores = torch.tensor([0.5, -1.0, 2.0, 3.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 0, 0], [1, 0, 1, 0]])
    out = scores_to_token_level(scores, mask)
    assert out.dtype == torch.float64
    # Row 3 has a hole (a masked tool output): the score still goes on the final response token.
    assert out.tolist() == [
        [0.0, 0.5, 0.0, 0.0],
        [0.0, 0.0, 0.0, -1.0],
        [0.0, 2.0, 0.0, 0.0],
        [0.0, 0.0, 3.0, 0.0],
    ]
    assert torch.equal(scores_to_token_level(scores, mask.bool()), out)
    assert torch.equal(scores_to_token_level(scores, mask.float()), out)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=5, max_size=5).filter(any), min_size=1, max_size=6), st.data())
def test_each_row_holds_its_score_once_at_or_after_every_response_token(
    rows: list[list[bool]], data: st.DataObject
) -> None:
    scores = torch.tensor(data.draw(st.lists(st.floats(-5, 5), min_size=len(rows), max_size=len(rows))))
    out = scores_to_token_level(scores, torch.tensor(rows))
    for b, row in enumerate(rows):
        last = max(t for t, on in enumerate(row) if on)
        assert out[b, last].item() == scores[b].item()
        assert [out[b, t].item() for t in range(5) if t != last] == [0.0] * 4


def test_rows_without_a_response_token_are_named() -> None:
    mask = torch.tensor([[1, 0], [0, 0], [1, 1], [0, 0]])
    with pytest.raises(ShapeError, match=r"no response token in rows \[1, 3\];"):
        scores_to_token_level(torch.zeros(4), mask)


def test_a_long_list_of_empty_rows_is_cut_short() -> None:
    with pytest.raises(ShapeError, match=r"rows \[0, 1, 2, 3, 4, 5, 6, 7, 8, 9\] and 2 more"):
        scores_to_token_level(torch.zeros(12), torch.zeros(12, 3))


@pytest.mark.parametrize(
    ("scores", "mask", "match"),
    [
        (torch.zeros(3), torch.ones(2, 4), r"response_mask must have shape \(B, T\) with B=3"),
        (torch.zeros(2, 1), torch.ones(2, 4), r"scores must have shape \(B\)"),
        (torch.zeros(2, dtype=torch.long), torch.ones(2, 4), "scores must have a floating dtype"),
        (torch.zeros(2), torch.full((2, 4), 2), "response_mask must hold only 0/1"),
        (torch.zeros(2), torch.ones(4), r"response_mask must have shape \(B, T\)"),
    ],
)
def test_scores_to_token_level_rejects(scores: torch.Tensor, mask: torch.Tensor, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        scores_to_token_level(scores, mask)
