"""Exact DBSCAN (Ester et al. 1996) over a dense neighbour matrix, with scikit-learn's labelling order."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from typing import cast

import torch

from rl_core._validation import check_positive, check_tensor

NOISE = -1
"""The label of a point that belongs to no cluster."""


def pairwise_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`(N, M)` Euclidean distances between the rows of `a` `(N, D)` and `b` `(M, D)`."""
    # The matmul shortcut cancels badly for close points; the eps test and the distances must be exact.
    return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")


def dbscan_from_neighbours(neighbours: torch.Tensor, min_samples: int) -> torch.Tensor:
    """DBSCAN labels from an `(N, N)` symmetric bool neighbour matrix whose diagonal is True.

    Returns `(N,)` int64 labels, `NOISE` for noise, clusters numbered 0.. in order of their lowest-index
    core point; a border point reachable from several clusters joins the lowest-numbered one.
    """
    n = neighbours.shape[0]
    device = neighbours.device
    if n == 0:
        return torch.empty(0, dtype=torch.int64, device=device)
    core = neighbours.sum(dim=-1) >= min_samples
    core_links = neighbours & core.unsqueeze(0) & core.unsqueeze(1)
    # Each core point ends with the lowest index in its connected component (min-label propagation, sped
    # up by pointer jumping); N marks "no core point".
    positions = torch.arange(n, device=device)
    none = torch.full_like(positions, n)
    root = torch.where(core, positions, none)
    while True:
        spread = torch.where(core_links, root.unsqueeze(0), n).amin(dim=-1)
        spread = torch.where(core, spread, none)
        jumped = torch.where(core, spread[spread.clamp(max=n - 1)], none)
        if torch.equal(jumped, root):
            break
        root = jumped
    # A border point takes the lowest root among its core neighbours, which is the cluster that scikit-learn's
    # index-ordered expansion reaches first.
    reach = torch.where(neighbours & core.unsqueeze(0), root.unsqueeze(0), n).amin(dim=-1)
    root = torch.where(core, root, reach)
    clustered = root < n
    # torch.unique is a boolean-dispatch wrapper that torch leaves untyped (a stub gap).
    roots = cast(torch.Tensor, torch.unique(root[clustered]))  # pyright: ignore[reportUnknownMemberType]
    labels = torch.full((n,), NOISE, dtype=torch.int64, device=device)
    labels[clustered] = torch.searchsorted(roots, root[clustered])
    return labels


@torch.no_grad()
def dbscan(points: torch.Tensor, eps: float, min_samples: int) -> torch.Tensor:
    """Cluster labels of `points` by density (DBSCAN), matching `sklearn.cluster.DBSCAN` with the Euclidean metric.

    A core point has at least `min_samples` points (itself included) within distance `eps` (inclusive);
    a cluster is a connected set of core points plus the non-core points within `eps` of them; every other
    point is noise. Clusters are numbered 0.. in order of their lowest-index core point, and a border point
    near several clusters joins the lowest-numbered one.

    Args:
        points: `(N, D)` float, finite.
        eps: > 0, the neighbourhood radius.
        min_samples: >= 1, the neighbourhood size (self included) that makes a point core.

    Returns:
        `(N,)` int64 labels, -1 for noise.
    """
    check_tensor("points", points, (None, None), floating=True)
    check_positive("eps", eps)
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 1:
        raise ValueError(f"min_samples must be an int >= 1, got {min_samples!r}")
    if not bool(torch.isfinite(points).all()):
        raise ValueError("points must be finite")
    neighbours = pairwise_distances(points, points) <= eps
    return dbscan_from_neighbours(neighbours, min_samples)
