"""Group numbering and per-group count, mean and population std."""

from __future__ import annotations

import math

import torch

from rl_core._groups import group_index, group_sum
from rl_core.shaping._groups import group_mean_and_std


def test_group_index_numbers_ids_in_sorted_order() -> None:
    index, num_groups = group_index(torch.tensor([40, -3, 40, 7]))
    assert index.tolist() == [2, 0, 2, 1]
    assert num_groups == 3


def test_group_sum_of_rows() -> None:
    values = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert group_sum(values, torch.tensor([1, 0, 1]), 3).tolist() == [[3.0, 4.0], [6.0, 8.0], [0.0, 0.0]]


def test_group_mean_and_std_by_hand() -> None:
    # Group 0: rows (1, 5) and (3, 5): mean (2, 5), population std (1, 0). Group 1: the single row (4, -1).
    # Group 2 is empty and gets zeros.
    values = torch.tensor([[1.0, 5.0], [4.0, -1.0], [3.0, 5.0]], dtype=torch.float64)
    count, mean, std = group_mean_and_std(values, torch.tensor([0, 1, 0]), 3)
    assert count.tolist() == [2.0, 1.0, 0.0]
    assert mean.tolist() == [[2.0, 5.0], [4.0, -1.0], [0.0, 0.0]]
    assert std.tolist() == [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]


def test_group_std_divides_by_n() -> None:
    # Deviations -2, -1, 3: sum of squares 14, population variance 14 / 3.
    _, _, std = group_mean_and_std(
        torch.tensor([1.0, 2.0, 6.0], dtype=torch.float64), torch.zeros(3, dtype=torch.long), 1
    )
    assert math.isclose(std.item(), math.sqrt(14.0 / 3.0), rel_tol=1e-15)
