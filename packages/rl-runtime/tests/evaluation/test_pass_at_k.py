"""The unbiased pass@k estimator against hand-worked values and its rejections."""

from __future__ import annotations

import pytest

from rl_runtime.evaluation import pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (4, 1, 1, 0.25),  # pass@1 is the fraction correct
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (8, 0, 8, 0.0),
        (8, 1, 8, 1.0),
        (3, 3, 1, 1.0),
    ],
)
def test_hand_worked_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [(4, 1, 0, r"k must lie in \[1, num_samples=4\]"), (4, 1, 5, "k must lie"), (4, 5, 2, "num_correct must lie")],
)
def test_rejections(n: int, c: int, k: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pass_at_k(n, c, k)
