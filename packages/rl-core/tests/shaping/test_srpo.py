"""SRPO's progress reward: hand-worked batches, a plain-loop reference in the shape of siiRL's code, rejections."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rl_core import ShapeError
from rl_core.shaping import srpo_progress_reward

from ._reference import reference_dbscan, squared_distance


def shaped(normalised_distance: float) -> float:
    """0.6 * sigmoid(10 * (0.5 - d)), the default failure reward."""
    return 0.6 / (1.0 + math.exp(-10.0 * (0.5 - normalised_distance)))


def test_no_cluster_means_distance_to_the_mean_success_by_hand() -> None:
    # Successes (1, 1) and (3, 1) standardise to (-1, 0) and (1, 0), 2 apart > eps: no cluster, so the one centre
    # is their mean (2, 1). Failures at distance 1, 3 and 2 normalise to 0, 1 and 0.5.
    success = torch.tensor([True, True, False, False, False])
    embeddings = torch.tensor([[1.0, 1.0], [3.0, 1.0], [2.0, 2.0], [2.0, 4.0], [2.0, 3.0]], dtype=torch.float64)
    rewards = srpo_progress_reward(success, embeddings, torch.zeros(5, dtype=torch.long))
    assert rewards.dtype == torch.float64
    torch.testing.assert_close(
        rewards, torch.tensor([1.0, 1.0, shaped(0.0), shaped(1.0), 0.3], dtype=torch.float64), rtol=0, atol=1e-12
    )


def test_noise_successes_are_not_centres_by_hand() -> None:
    # Successes (1, 1), (1, 1), (5, 1): the duplicates form a cluster with centre (1, 1); (5, 1) is noise.
    # Failures: (2, 1) at 1, (5, 2) at sqrt(17) (it would be 1 if the noise point were a centre), (1, 3) at 2.
    success = torch.tensor([True, True, True, False, False, False])
    embeddings = torch.tensor([[1.0, 1.0], [1.0, 1.0], [5.0, 1.0], [2.0, 1.0], [5.0, 2.0], [1.0, 3.0]])
    rewards = srpo_progress_reward(success, embeddings, torch.zeros(6, dtype=torch.long))
    assert rewards.dtype == torch.float32
    far = math.sqrt(17.0)
    expected = [1.0, 1.0, 1.0, shaped(0.0), shaped(1.0), shaped((2.0 - 1.0) / (far - 1.0))]
    torch.testing.assert_close(rewards, torch.tensor(expected), rtol=0, atol=1e-6)


def test_a_failure_measures_to_the_nearest_of_two_clusters_by_hand() -> None:
    # Clusters at (1, 1) and (9, 1). Failures: (8, 1) at 1, (5, 1) at 4, (1, 4) at 3 -> 0, 1, 2/3.
    # (The mean of all successes, (5, 1), would give 3, 0, 5 instead.)
    success = torch.tensor([True, True, True, True, False, False, False])
    embeddings = torch.tensor(
        [[1.0, 1.0], [9.0, 1.0], [1.0, 1.0], [9.0, 1.0], [8.0, 1.0], [5.0, 1.0], [1.0, 4.0]], dtype=torch.float64
    )
    rewards = srpo_progress_reward(success, embeddings, torch.zeros(7, dtype=torch.long))
    expected = [1.0] * 4 + [shaped(0.0), shaped(1.0), shaped(2.0 / 3.0)]
    torch.testing.assert_close(rewards, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-12)


def test_groups_invalid_embeddings_and_ties_by_hand() -> None:
    success = torch.tensor([True, True, False, False, True, False, False, True, False, False, True])
    embeddings = torch.tensor(
        [
            [1.0, 1.0],  # group 4: the only valid success, centre (1, 1)
            [0.0, 0.0],  # group 4: invalid success -> 0, and not part of the centre
            [1.0, 2.0],  # group 4: distance 1
            [1.0, 5.0],  # group 4: distance 4
            [2.0, 2.0],  # group 8: successes only -> 1
            [3.0, 3.0],  # group 1: failures only -> 0
            [0.0, 0.0],  # group 1: invalid failure -> 0
            [1.0, 1.0],  # group 6: centre (1, 1)
            [1.0, 3.0],  # group 6: two failures at the same distance 2 -> both normalise to 0.5
            [3.0, 1.0],
            [7.0, 7.0],  # group 9: a lone success -> 1
        ],
        dtype=torch.float64,
    )
    group_ids = torch.tensor([4, 4, 4, 4, 8, 1, 1, 6, 6, 6, 9])
    rewards = srpo_progress_reward(success, embeddings, group_ids)
    expected = [1.0, 0.0, shaped(0.0), shaped(1.0), 1.0, 0.0, 0.0, 1.0, 0.3, 0.3, 1.0]
    torch.testing.assert_close(rewards, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-12)


def test_a_single_failure_gets_the_midpoint_reward_and_parameters_apply() -> None:
    success = torch.tensor([1, 0])
    embeddings = torch.tensor([[1.0, 0.0], [4.0, 0.0]])
    ids = torch.tensor([0, 0])
    assert srpo_progress_reward(success, embeddings, ids).tolist() == pytest.approx([1.0, 0.3])
    # offset 0.2, steepness 5, max 0.8: 0.8 * sigmoid(5 * (0.2 - 0.5)).
    custom = srpo_progress_reward(success, embeddings, ids, max_failure_reward=0.8, steepness=5.0, offset=0.2)
    assert custom.tolist() == pytest.approx([1.0, 0.8 / (1.0 + math.exp(1.5))])


def test_an_empty_batch() -> None:
    rewards = srpo_progress_reward(
        torch.zeros(0, dtype=torch.bool), torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)
    )
    assert rewards.shape == (0,)


def reference_srpo(
    success: list[bool], embeddings: list[list[float]], groups: list[int], eps: float, min_samples: int
) -> tuple[list[float], dict[int, float]]:
    """siiRL's `compute_embodied_reward` as plain loops; also returns each shaped failure's raw distance."""
    rewards = [0.0] * len(success)
    distances: dict[int, float] = {}
    valid = [any(x != 0 for x in e) for e in embeddings]
    for group in set(groups):
        members = [i for i in range(len(success)) if groups[i] == group and valid[i]]
        wins = [i for i in members if success[i]]
        losses = [i for i in members if not success[i]]
        for i in wins:
            rewards[i] = 1.0
        if not wins or not losses:
            continue
        dim = len(embeddings[0])
        mean = [sum(embeddings[i][k] for i in wins) / len(wins) for k in range(dim)]
        std = [math.sqrt(sum((embeddings[i][k] - mean[k]) ** 2 for i in wins) / len(wins)) for k in range(dim)]
        scale = [s if s > 0 else 1.0 for s in std]
        scaled = [[(embeddings[i][k] - mean[k]) / scale[k] for k in range(dim)] for i in wins]
        # A pair at the radius up to rounding could go either way; such draws are skipped.
        assume(all(abs(squared_distance(a, b) - eps * eps) > 1e-9 for a in scaled for b in scaled))
        labels, _ = reference_dbscan(scaled, eps, min_samples)
        centres = []
        for cluster in sorted(set(labels) - {-1}):
            points = [scaled[j] for j in range(len(wins)) if labels[j] == cluster]
            centres.append([sum(p[k] for p in points) / len(points) * scale[k] + mean[k] for k in range(dim)])
        centres = centres or [mean]
        dist = [min(math.sqrt(squared_distance(embeddings[i], c)) for c in centres) for i in losses]
        low, high = min(dist), max(dist)
        for i, d in zip(losses, dist, strict=True):
            distances[i] = d
            rewards[i] = shaped(0.5 if high - low < 1e-6 else (d - low) / (high - low))
    return rewards, distances


batches = st.integers(1, 3).flatmap(
    lambda dim: st.lists(
        st.tuples(st.booleans(), st.lists(st.integers(-2, 2), min_size=dim, max_size=dim), st.integers(0, 2)),
        min_size=1,
        max_size=14,
    )
)


@settings(max_examples=100, deadline=None)
@given(batches, st.sampled_from([0.5, 1.0]), st.integers(1, 3))
def test_srpo_matches_the_plain_loop_reference(
    rows: list[tuple[bool, list[int], int]], eps: float, min_samples: int
) -> None:
    success = [s for s, _, _ in rows]
    embeddings = [[float(x) for x in e] for _, e, _ in rows]
    groups = [g for _, _, g in rows]
    expected, distances = reference_srpo(success, embeddings, groups, eps, min_samples)
    got = srpo_progress_reward(
        torch.tensor(success),
        torch.tensor(embeddings, dtype=torch.float64),
        torch.tensor(groups),
        dbscan_eps=eps,
        dbscan_min_samples=min_samples,
    ).tolist()
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    # Shaped failures lie strictly inside (0, 0.6) and a nearer failure never earns less than a farther one.
    for i, d_i in distances.items():
        assert 0.0 < got[i] < 0.6
        for j, d_j in distances.items():
            if groups[i] == groups[j] and d_j - d_i > 1e-6:
                assert got[i] > got[j]


@pytest.mark.parametrize(
    ("success", "embeddings", "group_ids", "kwargs", "error", "match"),
    [
        (
            torch.ones(3, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {},
            ShapeError,
            "embeddings must have shape .* B=3",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4, dtype=torch.long),
            torch.zeros(2, dtype=torch.long),
            {},
            ShapeError,
            "embeddings must have a floating dtype",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2),
            torch.zeros(2, dtype=torch.long),
            {},
            ShapeError,
            r"embeddings must have shape \(B, D\)",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2),
            {},
            ShapeError,
            "group_ids must have an integer",
        ),
        (
            torch.tensor([2, 0]),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {},
            ShapeError,
            "success must hold only 0/1",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.tensor([[1.0], [float("nan")]]),
            torch.zeros(2, dtype=torch.long),
            {},
            ValueError,
            "embeddings must be finite",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {"max_failure_reward": 0.0},
            ValueError,
            "max_failure_reward must be > 0",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {"steepness": -1.0},
            ValueError,
            "steepness must be > 0",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {"offset": math.nan},
            ValueError,
            "offset must be finite",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {"dbscan_eps": 0.0},
            ValueError,
            "dbscan_eps must be > 0",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {"dbscan_min_samples": 0},
            ValueError,
            "dbscan_min_samples must be an int >= 1",
        ),
        (
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 4),
            torch.zeros(2, dtype=torch.long),
            {"dbscan_min_samples": True},
            ValueError,
            "dbscan_min_samples must be an int >= 1",
        ),
    ],
)
def test_srpo_rejects(
    success: torch.Tensor,
    embeddings: torch.Tensor,
    group_ids: torch.Tensor,
    kwargs: dict[str, float],
    error: type[Exception],
    match: str,
) -> None:
    with pytest.raises(error, match=match):
        srpo_progress_reward(success, embeddings, group_ids, **kwargs)
