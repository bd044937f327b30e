"""Merging the metric dicts of several ranks into one, with the reduction each metric's meaning calls for."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence

from rl_runtime.metrics._errors import MetricsError
from rl_runtime.metrics._perf import GLOBAL_SEQLEN_PREFIX, TIMING_PREFIX


class Reduction(str, enum.Enum):
    """How the values of one metric from several ranks become one value."""

    MEAN = "mean"
    SUM = "sum"
    MAX = "max"
    MIN = "min"


EXACT_REDUCTIONS: Mapping[str, Reduction] = {
    # Each rank reports its own tokens over (step time x all GPUs); the sum is the global figure.
    "perf/throughput": Reduction.SUM,
    "perf/total_num_tokens": Reduction.SUM,
    # A synchronous step lasts as long as its slowest rank.
    "perf/time_per_step": Reduction.MAX,
}
"""Metrics whose reduction their name's shape does not tell."""

_SUM_PREFIXES = ("num_", "total_", "bytes_")
_SUM_SUFFIXES = ("_count", "_tokens", "_bytes")
_MINMAX_DIFF = f"{GLOBAL_SEQLEN_PREFIX}/minmax_diff"


def reduction_for(name: str, overrides: Mapping[str, Reduction] | None = None) -> Reduction:
    """The reduction of metric `name`; the first rule that matches wins.

    1. `overrides[name]`, then `EXACT_REDUCTIONS[name]`.
    2. `timing_s/*`: MAX, since a stage every rank runs in step lasts as long as its slowest rank.
    3. Last path segment `max`, `max_*` or `*_max`: MAX; `min`, `min_*` or `*_min`: MIN.
    4. Counts: a segment named `count`, or a last segment `num_*`, `total_*`, `bytes_*`, `*_count`, `*_tokens`,
       `*_bytes`: SUM.
    5. Everything else (means, ratios, losses, norms): MEAN, unweighted over ranks; exact for per-sample means
       when every rank holds as many samples (the batch plan guarantees it), a close estimate for token means.

    Ratios of merged quantities (`timing_per_token_ms/*`) are exact only when recomputed from the merged
    `timing_s/*` and global token counts with `compute_timing_metrics`; prefer that on the driver.
    """
    if overrides and name in overrides:
        return Reduction(overrides[name])
    if name in EXACT_REDUCTIONS:
        return EXACT_REDUCTIONS[name]
    if name.startswith(TIMING_PREFIX):
        return Reduction.MAX
    segments = name.split("/")
    last = segments[-1]
    for word, reduction in (("max", Reduction.MAX), ("min", Reduction.MIN)):
        if last == word or last.startswith(f"{word}_") or last.endswith(f"_{word}"):
            return reduction
    if "count" in segments or last.startswith(_SUM_PREFIXES) or last.endswith(_SUM_SUFFIXES):
        return Reduction.SUM
    return Reduction.MEAN


def _reduce(values: list[float], reduction: Reduction) -> float:
    finite = [value for value in values if not math.isnan(value)]
    if not finite:
        return math.nan
    if reduction is Reduction.SUM:
        return math.fsum(finite)
    if reduction is Reduction.MAX:
        return max(finite)
    if reduction is Reduction.MIN:
        return min(finite)
    return math.fsum(finite) / len(finite)


def reduce_rank_metrics(
    per_rank: Sequence[Mapping[str, float]], overrides: Mapping[str, Reduction] | None = None
) -> dict[str, float]:
    """One metrics dict from the dicts of several ranks, each metric reduced as `reduction_for` says.

    A metric only some ranks report (critic metrics on critic ranks) is reduced over those; NaN values (a rank
    with nothing to summarise) are skipped, and a metric that is NaN on every rank stays NaN.
    `global_seqlen/minmax_diff` is recomputed from the merged max and min.
    """
    collected: dict[str, list[float]] = {}
    for rank, metrics in enumerate(per_rank):
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise MetricsError(f"metric {name!r} of rank {rank} must be a number, got {type(value).__name__}")
            collected.setdefault(name, []).append(float(value))
    merged = {name: _reduce(values, reduction_for(name, overrides)) for name, values in collected.items()}
    high, low = f"{GLOBAL_SEQLEN_PREFIX}/max", f"{GLOBAL_SEQLEN_PREFIX}/min"
    if _MINMAX_DIFF in merged and high in merged and low in merged:
        merged[_MINMAX_DIFF] = merged[high] - merged[low]
    return merged
