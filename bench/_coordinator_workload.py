"""The workload of bench/coordinator.py, shared by its own process and the siiRL worker (which has no rl_coordinator).

8 producers x batches x 8 samples; a sample is a 1024-token int64 payload (8 KiB, one row of a producer's
`(8, 1024)` batch tensor) with a token count drawn per sample between 64 and 1024, so balancing has something
to do. The consumer takes steps of 128 samples.
"""

from __future__ import annotations

import os
import sys

import ray.cloudpickle
import torch

# Ray worker processes cannot import bench/ modules by name; ship this module's functions by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
# A local benchmark cluster needs no token; both entry points import this module before ray.init reads it.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# Workers at niceness 0, as rl_runtime's trainer starts them (Ray's default of 15 slowed every actor call here);
# the siiRL interpreter inherits this environment, so both sides run under the same setting.
os.environ.setdefault("RAY_worker_niceness", "0")

PRODUCERS, BATCHES, SAMPLES_PER_BATCH, TOKENS = 8, 200, 8, 1024
TOTAL_SAMPLES = PRODUCERS * BATCHES * SAMPLES_PER_BATCH
STEP_BATCH, MAIN_RANKS, SWEEP_RANKS = 128, 4, (2, 8, 32)
CONSUMER_ACTORS = 4
MAIN_BATCHES, SWEEP_BATCHES = BATCHES, 32
"""Batches per producer actually run: the full count at 4 ranks; the rank sweep (2, 8 and 32 ranks, against the
gather actor) is scaled to 32 to keep the whole run near 4 minutes on 2 busy cores."""
SIIRL_STEPS = 4
"""siiRL runs 4 lockstep steps of 128 (512 samples) per repetition, not 100: one ray.put per sample."""
WARMUP_BATCHES = 16
MIN_TOKENS, PROMPT_TOKENS = 64, 32
VOCAB, SEED = 32000, 0


def batch_payloads(producer: int, batches: int) -> list[tuple[list[int], torch.Tensor]]:
    """(token count per sample, `(SAMPLES_PER_BATCH, TOKENS)` int64 payload) for each of a producer's batches."""
    gen = torch.Generator().manual_seed(SEED + producer)
    out = []
    for _ in range(batches):
        lengths = torch.randint(MIN_TOKENS, TOKENS + 1, (SAMPLES_PER_BATCH,), generator=gen).tolist()
        out.append((lengths, torch.randint(0, VOCAB, (SAMPLES_PER_BATCH, TOKENS), generator=gen)))
    return out


def consumer_ranks(dp_size: int) -> list[list[int]]:
    """The ranks each consumer actor plays: rank r on actor r % CONSUMER_ACTORS."""
    return [list(range(c, dp_size, CONSUMER_ACTORS)) for c in range(CONSUMER_ACTORS)]
