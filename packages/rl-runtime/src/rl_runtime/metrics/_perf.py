"""verl's timing, throughput and sequence-balance metrics: `timing_s/*`, `timing_per_token_ms/*`, `perf/*`,
`global_seqlen/*`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rl_runtime.metrics._errors import MetricsError

TIMING_PREFIX = "timing_s/"
"""Seconds spent in a stage, accumulated over the step (what `Timer` records)."""
PER_TOKEN_PREFIX = "timing_per_token_ms/"
RESPONSE_TOKEN_STAGES = ("gen",)
"""Stages timed per response token: generation produces only the response."""
ALL_TOKEN_STAGES = (
    "ref",
    "values",  # not-a-sample-field: a timing stage (verl's timing_s/values)
    "adv",
    "update_critic",
    "update_actor",
)
"""Stages timed per prompt+response token: they run forward passes over whole sequences (verl's list)."""
STEP_TIMING = "timing_s/step"
GLOBAL_SEQLEN_PREFIX = "global_seqlen"
_MS_PER_S = 1000.0


def compute_timing_metrics(
    timings: Mapping[str, float], *, num_prompt_tokens: int, num_response_tokens: int
) -> dict[str, float]:
    """`timing_s/*` as given plus verl's `timing_per_token_ms/<stage>` for the stages verl normalises.

    `timings` holds `timing_s/<stage>` seconds (other keys are ignored); the token counts are the step's
    global totals. `gen` is divided by response tokens, `ref, values, adv, update_critic, update_actor` by
    prompt+response tokens; a stage over zero tokens reports 0.0, as verl does.
    """
    for name, count in (("num_prompt_tokens", num_prompt_tokens), ("num_response_tokens", num_response_tokens)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise MetricsError(f"{name} must be an int >= 0 (a token count), got {count!r}")
    tokens = {stage: num_response_tokens for stage in RESPONSE_TOKEN_STAGES}
    tokens.update({stage: num_prompt_tokens + num_response_tokens for stage in ALL_TOKEN_STAGES})
    metrics = {name: float(seconds) for name, seconds in timings.items() if name.startswith(TIMING_PREFIX)}
    for stage, count in tokens.items():
        seconds = metrics.get(TIMING_PREFIX + stage)
        if seconds is not None:
            metrics[PER_TOKEN_PREFIX + stage] = seconds * _MS_PER_S / count if count > 0 else 0.0
    return metrics


def compute_throughput_metrics(*, total_num_tokens: int, step_seconds: float, n_gpus: int) -> dict[str, float]:
    """verl's `perf/total_num_tokens`, `perf/time_per_step` and `perf/throughput` (tokens / s / GPU).

    `total_num_tokens` counts the global batch's non-padding prompt+response tokens (`rl_core.metrics.count_tokens`);
    `n_gpus` is every GPU of the run's resource pool, rollout included when colocated.
    """
    if isinstance(total_num_tokens, bool) or not isinstance(total_num_tokens, int) or total_num_tokens < 0:
        raise MetricsError(f"total_num_tokens must be an int >= 0, got {total_num_tokens!r}")
    if not isinstance(step_seconds, (int, float)) or not step_seconds > 0 or math.isinf(step_seconds):
        raise MetricsError(f"step_seconds must be a finite number > 0 (timing_s/step), got {step_seconds!r}")
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int) or n_gpus < 1:
        raise MetricsError(f"n_gpus must be an int >= 1 (all GPUs of the resource pool), got {n_gpus!r}")
    return {
        "perf/total_num_tokens": float(total_num_tokens),
        "perf/time_per_step": float(step_seconds),
        "perf/throughput": total_num_tokens / (step_seconds * n_gpus),
    }


def contiguous_rank_tokens(sequence_lengths: Sequence[int], num_ranks: int) -> list[int]:
    """Per-rank token sums of the naive split: rank r takes the r-th contiguous block of the batch (verl's
    "before balancing" figure)."""
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 1:
        raise MetricsError(f"num_ranks must be an int >= 1, got {num_ranks!r}")
    if not sequence_lengths or len(sequence_lengths) % num_ranks:
        raise MetricsError(
            f"the batch of {len(sequence_lengths)} sequences must split evenly over {num_ranks} ranks; "
            "check the batch plan's divisibility"
        )
    size = len(sequence_lengths) // num_ranks
    return [int(sum(sequence_lengths[start : start + size])) for start in range(0, len(sequence_lengths), size)]


def global_seqlen_metrics(
    rank_tokens: Sequence[int], balanced_rank_tokens: Sequence[int], prefix: str = GLOBAL_SEQLEN_PREFIX
) -> dict[str, float]:
    """verl's `global_seqlen/{min,max,minmax_diff,balanced_min,balanced_max,mean}`.

    `rank_tokens` are the per-rank token sums before balancing (`contiguous_rank_tokens`), `balanced_rank_tokens`
    after; both list every data-parallel rank and hold the same total, since balancing only moves samples.
    """
    if not rank_tokens or len(rank_tokens) != len(balanced_rank_tokens):
        raise MetricsError(
            f"rank_tokens and balanced_rank_tokens must list the same ranks (one sum each), got "
            f"{len(rank_tokens)} and {len(balanced_rank_tokens)} sums"
        )
    if sum(rank_tokens) != sum(balanced_rank_tokens):
        raise MetricsError(
            f"balancing must keep the token total: rank_tokens sum to {sum(rank_tokens)}, balanced_rank_tokens "
            f"to {sum(balanced_rank_tokens)}; pass the sums of the same batch"
        )
    return {
        f"{prefix}/min": float(min(rank_tokens)),
        f"{prefix}/max": float(max(rank_tokens)),
        f"{prefix}/minmax_diff": float(max(rank_tokens) - min(rank_tokens)),
        f"{prefix}/balanced_min": float(min(balanced_rank_tokens)),
        f"{prefix}/balanced_max": float(max(balanced_rank_tokens)),
        f"{prefix}/mean": sum(rank_tokens) / len(balanced_rank_tokens),
    }
