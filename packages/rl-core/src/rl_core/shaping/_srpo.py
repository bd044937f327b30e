"""SRPO's progress reward (Fei et al. 2025, https://arxiv.org/abs/2511.15605): failures scored by their distance
to the successful trajectories of the same task in the batch, as siiRL's `compute_embodied_reward` does."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

import math

import torch

from rl_core._groups import group_index, group_sum
from rl_core._validation import as_bool_mask, check_positive, check_same_device, check_tensor
from rl_core.shaping._dbscan import dbscan_from_neighbours, pairwise_distances
from rl_core.shaping._groups import group_mean_and_std

# siiRL's defaults: a failure earns at most 0.6 (below a success's 1.0), through a sigmoid centred on the middle
# of the normalised distance range; DBSCAN with scikit-learn's eps and min_samples.
_DEFAULT_MAX_FAILURE_REWARD = 0.6
_DEFAULT_STEEPNESS = 10.0
_DEFAULT_OFFSET = 0.5
_DEFAULT_DBSCAN_EPS = 0.5
_DEFAULT_DBSCAN_MIN_SAMPLES = 2

_SUCCESS_REWARD = 1.0
_MIN_DISTANCE_RANGE = 1e-6
"""Below this spread of a group's failure distances, min-max normalisation is noise: every failure gets 0.5."""
_TIED_DISTANCE = 0.5

_EPS64 = torch.finfo(torch.float64).eps
"""A feature whose std is within n * eps * |mean| of 0 is constant up to rounding (scikit-learn's bound); its
scale is 1, as in `StandardScaler`."""


def _success_centres(
    points: torch.Tensor, groups: torch.Tensor, num_groups: int, eps: float, min_samples: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(K, D)` raw-space centres of the success clusters of each group and their `(K,)` groups.

    Each group's successes are standardised with that group's per-feature mean and population std, clustered
    by DBSCAN (pairs across groups are never neighbours), and every cluster's mean is mapped back to raw space.
    A group with successes but no cluster gets the mean of its raw successes as its one centre.
    """
    count, mean, std = group_mean_and_std(points, groups, num_groups)
    constant = std <= count.unsqueeze(-1) * _EPS64 * mean.abs()
    scale = torch.where(constant, torch.ones_like(std), std)
    standard = (points - mean[groups]) / scale[groups]
    same_group = groups.unsqueeze(0) == groups.unsqueeze(1)
    labels = dbscan_from_neighbours((pairwise_distances(standard, standard) <= eps) & same_group, min_samples)

    clustered = labels >= 0
    num_clusters = int(labels.max()) + 1 if bool(clustered.any()) else 0
    members = labels[clustered]
    cluster_group = torch.zeros(num_clusters, dtype=groups.dtype, device=groups.device)
    # Every member of a cluster is in the same group, so the scatter writes one value per cluster.
    cluster_group.scatter_(0, members, groups[clustered])
    _, cluster_mean, _ = group_mean_and_std(standard[clustered], members, num_clusters)
    cluster_centres = cluster_mean * scale[cluster_group] + mean[cluster_group]

    has_cluster = torch.zeros(num_groups, dtype=torch.bool, device=groups.device)
    has_cluster[cluster_group] = True
    fallback_group = ((count > 0) & ~has_cluster).nonzero().flatten()
    centres = torch.cat([cluster_centres, mean[fallback_group]])
    return centres, torch.cat([cluster_group, fallback_group])


def _min_max_within_groups(values: torch.Tensor, groups: torch.Tensor, num_groups: int) -> torch.Tensor:
    """`(N,)` values rescaled to [0, 1] within each group; a group spread below `_MIN_DISTANCE_RANGE` gets 0.5."""
    empty = torch.zeros(num_groups, dtype=values.dtype, device=values.device)
    low = empty.scatter_reduce(0, groups, values, "amin", include_self=False)[groups]
    high = empty.scatter_reduce(0, groups, values, "amax", include_self=False)[groups]
    spread = high - low
    tied = spread < _MIN_DISTANCE_RANGE
    return torch.where(tied, torch.full_like(values, _TIED_DISTANCE), (values - low) / torch.where(tied, 1.0, spread))


def _check_parameters(
    max_failure_reward: float, steepness: float, offset: float, dbscan_eps: float, dbscan_min_samples: int
) -> None:
    check_positive("max_failure_reward", max_failure_reward)
    check_positive("steepness", steepness)
    if not math.isfinite(offset):
        raise ValueError(f"offset must be finite, got {offset}")
    check_positive("dbscan_eps", dbscan_eps)
    if isinstance(dbscan_min_samples, bool) or not isinstance(dbscan_min_samples, int) or dbscan_min_samples < 1:
        raise ValueError(f"dbscan_min_samples must be an int >= 1, got {dbscan_min_samples!r}")


@torch.no_grad()
def srpo_progress_reward(
    success: torch.Tensor,
    embeddings: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    max_failure_reward: float = _DEFAULT_MAX_FAILURE_REWARD,
    steepness: float = _DEFAULT_STEEPNESS,
    offset: float = _DEFAULT_OFFSET,
    dbscan_eps: float = _DEFAULT_DBSCAN_EPS,
    dbscan_min_samples: int = _DEFAULT_DBSCAN_MIN_SAMPLES,
) -> torch.Tensor:
    """Sequence rewards for trajectories: 1 for a success, a progress score in (0, max_failure_reward) for a failure.

    Within each group (task), the successes are standardised per feature (population std; a constant feature
    keeps scale 1) and clustered with DBSCAN; the success centres are the clusters' means in raw space, or the
    mean success when no cluster forms. A failure's distance is its Euclidean distance to the nearest centre,
    min-max normalised over the group's failures (all within 1e-6 of each other: 0.5), and its reward is
    `max_failure_reward * sigmoid(steepness * (offset - normalised_distance))`: nearer failures earn more.
    A failure in a group without a success gets 0. A sample whose embedding is all zeros is invalid: it gets 0,
    success or not, and takes no part in its group.

    Args:
        success: `(B,)` bool or 0/1, whether each trajectory succeeded.
        embeddings: `(B, D)` float, finite, one embedding (e.g. V-JEPA) per trajectory.
        group_ids: `(B,)` integer group (task) of each trajectory; samples need not be contiguous.
        max_failure_reward: > 0, the reward of a failure at normalised distance -inf (0.6 in SRPO).
        steepness: > 0, the sigmoid's slope.
        offset: the normalised distance at which a failure earns half of `max_failure_reward`.
        dbscan_eps: > 0, the DBSCAN radius in standardised units.
        dbscan_min_samples: >= 1, the DBSCAN core-point neighbourhood size, the point itself included.

    Returns:
        `(B,)` rewards in the dtype of `embeddings`.
    """
    dims: dict[str, int] = {}
    check_tensor("success", success, ("B",), dims=dims)
    check_tensor("embeddings", embeddings, ("B", "D"), dims=dims, floating=True)
    check_tensor("group_ids", group_ids, ("B",), dims=dims, floating=False)
    check_same_device(success=success, embeddings=embeddings, group_ids=group_ids)
    _check_parameters(max_failure_reward, steepness, offset, dbscan_eps, dbscan_min_samples)
    if not bool(torch.isfinite(embeddings).all()):
        raise ValueError("embeddings must be finite; mark an invalid trajectory with an all-zero embedding instead")
    succeeded = as_bool_mask("success", success)

    # float64 throughout: the standardisation, the eps test and the min-max all divide by small spreads.
    points = embeddings.double()
    valid = (points != 0).any(dim=-1)
    index, num_groups = group_index(group_ids)
    won = succeeded & valid
    lost = ~succeeded & valid
    rewards = won.double() * _SUCCESS_REWARD
    mixed = (group_sum(won.double(), index, num_groups) > 0) & (group_sum(lost.double(), index, num_groups) > 0)
    # Only groups with both outcomes are shaped; DBSCAN's pairwise matrix spans their successes only.
    reference = won & mixed[index]
    probe = lost & mixed[index]
    if bool(probe.any()):
        centres, centre_group = _success_centres(
            points[reference], index[reference], num_groups, dbscan_eps, dbscan_min_samples
        )
        probe_group = index[probe]
        distances = pairwise_distances(points[probe], centres)
        distances = torch.where(probe_group.unsqueeze(-1) == centre_group.unsqueeze(0), distances, math.inf)
        normalised = _min_max_within_groups(distances.amin(dim=-1), probe_group, num_groups)
        rewards[probe] = max_failure_reward * torch.sigmoid(steepness * (offset - normalised))
    return rewards.to(embeddings.dtype)
