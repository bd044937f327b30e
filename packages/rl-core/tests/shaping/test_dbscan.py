"""Exact DBSCAN against hand examples and a plain-Python BFS reference."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError
from rl_core.shaping import dbscan

from ._reference import reference_dbscan, squared_distance


def test_two_clusters_and_noise_by_hand() -> None:
    points = torch.tensor([[0.0, 0.0], [0.0, 0.1], [5.0, 5.0], [5.0, 5.2], [10.0, 10.0], [0.3, 0.0]])
    labels = dbscan(points, eps=0.5, min_samples=2)
    assert labels.dtype == torch.int64
    assert labels.tolist() == [0, 0, 1, 1, -1, 0]


def test_min_samples_one_makes_every_point_a_cluster_seed() -> None:
    points = torch.tensor([[0.0], [1.0], [5.0], [2.0]])
    assert dbscan(points, eps=1.0, min_samples=1).tolist() == [0, 0, 1, 0]


def test_border_points_join_the_cluster_and_isolated_ones_are_noise() -> None:
    # min_samples 3, eps 1: the middle point has 3 neighbours (itself included) and is core; the ends have 2 and
    # are border points of its cluster; the far point is noise.
    points = torch.tensor([[0.0], [1.0], [2.0], [4.0]], dtype=torch.float64)
    assert dbscan(points, eps=1.0, min_samples=3).tolist() == [0, 0, 0, -1]


def test_a_border_point_between_two_clusters_joins_the_lower_numbered_one() -> None:
    # Two tight clumps of 4 at x = 1..1.3 and x = -1..-1.3, and a point at 0 that sees only (1, 0) and (-1, 0):
    # 3 neighbours < min_samples 4, so it is a border point of both clusters. The right clump comes first.
    right = [[1.0, 0.0], [1.1, 0.0], [1.2, 0.0], [1.3, 0.0]]
    left = [[-1.0, 0.0], [-1.1, 0.0], [-1.2, 0.0], [-1.3, 0.0]]
    labels = dbscan(torch.tensor([*right, [0.0, 0.0], *left], dtype=torch.float64), eps=1.0, min_samples=4)
    assert labels.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    labels = dbscan(torch.tensor([[0.0, 0.0], *left, *right], dtype=torch.float64), eps=1.0, min_samples=4)
    assert labels.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]


def test_a_chain_is_one_cluster_whatever_the_order() -> None:
    # Ten points 0.9 apart form one chain; shuffled, it stays one cluster.
    order = [7, 2, 9, 0, 5, 3, 8, 1, 6, 4]
    points = torch.tensor([[0.9 * i] for i in order], dtype=torch.float64)
    assert dbscan(points, eps=1.0, min_samples=2).tolist() == [0] * 10


def test_empty_and_all_noise_inputs() -> None:
    assert dbscan(torch.zeros(0, 3), eps=1.0, min_samples=2).tolist() == []
    assert dbscan(torch.tensor([[0.0], [3.0]]), eps=1.0, min_samples=2).tolist() == [-1, -1]


# Integer coordinates and eps = sqrt(k + 0.5): squared distances are integers, never equal to eps^2, so no
# rounding can move a pair across the radius.
point_clouds = st.integers(1, 3).flatmap(
    lambda d: st.tuples(st.just(d), st.lists(st.lists(st.integers(0, 5), min_size=d, max_size=d), max_size=24))
)


@settings(max_examples=100, deadline=None)
@given(point_clouds, st.sampled_from([0.5, 1.5, 2.5, 4.5, 8.5]), st.integers(1, 5))
def test_dbscan_matches_a_bfs_reference(
    cloud: tuple[int, list[list[int]]], eps_squared: float, min_samples: int
) -> None:
    dim, points = cloud
    eps = math.sqrt(eps_squared)
    coords = [[float(x) for x in p] for p in points]
    expected, core = reference_dbscan(coords, eps, min_samples)
    got = dbscan(torch.tensor(coords, dtype=torch.float64).reshape(len(coords), dim), eps, min_samples).tolist()

    # Core points: the same partition, up to renaming of the clusters.
    renaming: dict[int, int] = {}
    for i in (i for i in range(len(coords)) if core[i]):
        assert got[i] >= 0
        assert renaming.setdefault(expected[i], got[i]) == got[i]
    assert len(set(renaming.values())) == len(renaming)
    # Noise is noise; a border point sits in the cluster of one of its core neighbours.
    for i in (i for i in range(len(coords)) if not core[i]):
        if expected[i] == -1:
            assert got[i] == -1
            continue
        near_clusters = {
            got[j] for j in range(len(coords)) if core[j] and squared_distance(coords[i], coords[j]) <= eps_squared
        }
        assert got[i] in near_clusters
    # Stronger, as documented: clusters numbered by lowest core index and the index-ordered BFS's border choice.
    assert got == expected


@pytest.mark.parametrize(
    ("points", "eps", "min_samples", "error", "match"),
    [
        (torch.zeros(3), 1.0, 2, ShapeError, r"points must have shape \(None, None\)"),
        (torch.zeros(3, 2, dtype=torch.long), 1.0, 2, ShapeError, "points must have a floating dtype"),
        ([[0.0, 1.0]], 1.0, 2, ShapeError, "points must be a torch.Tensor"),
        (torch.zeros(3, 2), 0.0, 2, ValueError, "eps must be > 0"),
        (torch.zeros(3, 2), 1.0, 0, ValueError, "min_samples must be an int >= 1, got 0"),
        (torch.zeros(3, 2), 1.0, 2.5, ValueError, "min_samples must be an int >= 1, got 2.5"),
        (torch.tensor([[0.0], [float("inf")]]), 1.0, 2, ValueError, "points must be finite"),
    ],
)
def test_dbscan_rejects(points: object, eps: float, min_samples: int, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        dbscan(points, eps, min_samples)  # type: ignore[arg-type]
