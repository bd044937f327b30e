"""Plain-Python DBSCAN used as the independent reference in the shaping tests."""

from __future__ import annotations

from collections import deque


def squared_distance(a: list[float], b: list[float]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True))


def reference_dbscan(points: list[list[float]], eps: float, min_samples: int) -> tuple[list[int], list[bool]]:
    """Textbook DBSCAN: labels (-1 for noise) and core flags; clusters grow by BFS from cores in index order."""
    n = len(points)
    neighbours = [[j for j in range(n) if squared_distance(points[i], points[j]) <= eps * eps] for i in range(n)]
    core = [len(around) >= min_samples for around in neighbours]
    labels = [-1] * n
    cluster = 0
    for start in range(n):
        if labels[start] != -1 or not core[start]:
            continue
        labels[start] = cluster
        queue = deque([start])
        while queue:
            point = queue.popleft()
            for other in neighbours[point]:
                if labels[other] == -1:
                    labels[other] = cluster
                    if core[other]:
                        queue.append(other)
        cluster += 1
    return labels, core
