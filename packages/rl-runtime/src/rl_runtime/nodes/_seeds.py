"""Deterministic per-sample seeds and ids, so a resumed run draws exactly what an uninterrupted one would."""

from __future__ import annotations

_MASK64 = (1 << 64) - 1
_MAX_SEED = (1 << 63) - 1
"""Engines take non-negative int64 seeds."""
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
SAMPLE_BITS = 24
"""Low bits of a uid count samples within one (step, rank, draw); 16M samples per rank per step is ample."""
DRAW_BITS = 8
"""Bits for the draw (generation round) within a step: dynamic sampling may draw up to 256 rounds."""
RANK_BITS = 12
"""Bits for the data-parallel rank: up to 4096 ranks."""


def _splitmix64(value: int) -> int:
    value = (value + _GOLDEN) & _MASK64
    value = ((value ^ (value >> 30)) * _MIX1) & _MASK64
    value = ((value ^ (value >> 27)) * _MIX2) & _MASK64
    return value ^ (value >> 31)


def sample_seed(*parts: int) -> int:
    """A seed in [0, 2**63) mixed from `parts` (run seed, step, rank, draw, sample): equal parts, equal seed."""
    state = 0
    for part in parts:
        state = _splitmix64(state ^ (part & _MASK64))
    return state & _MAX_SEED


def sample_uid(step: int, rank: int, draw: int, index: int) -> int:
    """A run-unique int64 id of sample `index` of draw `draw` on `rank` at `step`."""
    if not (0 <= index < 1 << SAMPLE_BITS and 0 <= draw < 1 << DRAW_BITS and 0 <= rank < 1 << RANK_BITS):
        raise ValueError(
            f"sample_uid(step={step}, rank={rank}, draw={draw}, index={index}) exceeds the id layout: at most "
            f"{1 << RANK_BITS} ranks, {1 << DRAW_BITS} draws per step and {1 << SAMPLE_BITS} samples per draw"
        )
    return (((step << RANK_BITS | rank) << DRAW_BITS | draw) << SAMPLE_BITS) | index
