"""A seeded synthetic arithmetic dataset in GSM8K format, with train and held-out splits disjoint by construction."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

OPERATIONS = ("+", "-", "*")
"""Supported operations; the question shows the symbol itself."""
TRAIN_FILE = "train.jsonl"
HELDOUT_FILE = "heldout.jsonl"
DEFAULT_TRAIN_SIZE = 3500
DEFAULT_HELDOUT_SIZE = 200
DEFAULT_DATASET_SEED = 0
"""Fixed, not the run's seed: the SFT warm start and the RL run must see the same held-out split."""
_ENUMERATE_FRACTION = 0.5  # above this share of all problems, enumerate and sample instead of rejection sampling

Problem = tuple[int, str, int]


@dataclass(frozen=True)
class ArithmeticSpec:
    """Which problems exist: operations and the inclusive operand range; `-` keeps results >= 0 by default."""

    operations: tuple[str, ...] = ("+", "-")
    min_operand: int = 0
    max_operand: int = 99
    allow_negative: bool = False

    def __post_init__(self) -> None:
        unknown = [op for op in self.operations if op not in OPERATIONS]
        if not self.operations or unknown:
            raise ValueError(f"operations must be a non-empty subset of {OPERATIONS}, got {self.operations}")
        if not 0 <= self.min_operand <= self.max_operand:
            raise ValueError(f"need 0 <= min_operand <= max_operand, got {self.min_operand}, {self.max_operand}")

    def is_valid(self, problem: Problem) -> bool:
        """Whether `problem` belongs to this spec's space."""
        a, op, b = problem
        return self.allow_negative or op != "-" or a >= b

    def num_problems(self) -> int:
        """How many distinct problems the spec allows."""
        n = self.max_operand - self.min_operand + 1
        per_op = {op: n * n if op != "-" or self.allow_negative else n * (n + 1) // 2 for op in self.operations}
        return sum(per_op.values())


DEFAULT_SPEC = ArithmeticSpec(operations=("+", "-"), min_operand=0, max_operand=49)
"""The embedded default's problems (3775 of them). Operands up to 49, not 99: the tiny model's held-out exact
match then climbs steeply after a few hundred SFT steps (seed 0: 0.13 at 500 steps of 32 rows, 0.5 at 800,
1.0 from 2150), while with operands up to 99 it was still below 0.1 after 1400 steps, even with 14000
training rows or a 4x wider model."""


def format_row(problem: Problem) -> dict[str, str]:
    """The GSM8K-format row of a problem: `What is 23 + 58?` / `23 + 58 = 81 #### 81`."""
    a, op, b = problem
    result = a + b if op == "+" else a - b if op == "-" else a * b
    return {"question": f"What is {a} {op} {b}?", "answer": f"{a} {op} {b} = {result} #### {result}"}


def generate_arithmetic_splits(
    train_size: int, heldout_size: int, seed: int, spec: ArithmeticSpec | None = None
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Return (train, heldout) rows: distinct problems drawn with `random.Random(seed)`, no problem in both."""
    spec = spec or ArithmeticSpec()
    if train_size < 0 or heldout_size < 0:
        raise ValueError(f"split sizes must be >= 0, got train_size={train_size}, heldout_size={heldout_size}")
    total, available = train_size + heldout_size, spec.num_problems()
    if total > available:
        raise ValueError(f"asked for {total} distinct problems but the spec allows only {available}; widen the ranges")
    rng = random.Random(seed)
    problems = _draw_distinct(spec, total, rng)
    heldout, train = problems[:heldout_size], problems[heldout_size:]
    assert not set(train) & set(heldout), "train and held-out splits overlap"
    return [format_row(p) for p in train], [format_row(p) for p in heldout]


def _draw_distinct(spec: ArithmeticSpec, count: int, rng: random.Random) -> list[Problem]:
    lo, hi = spec.min_operand, spec.max_operand
    if count > _ENUMERATE_FRACTION * spec.num_problems():
        space = [(a, op, b) for op in spec.operations for a in range(lo, hi + 1) for b in range(lo, hi + 1)]
        return rng.sample([p for p in space if spec.is_valid(p)], count)
    seen: set[Problem] = set()
    drawn: list[Problem] = []
    while len(drawn) < count:
        problem = (rng.randint(lo, hi), rng.choice(spec.operations), rng.randint(lo, hi))
        if spec.is_valid(problem) and problem not in seen:
            seen.add(problem)
            drawn.append(problem)
    return drawn


def write_arithmetic_dataset(
    folder: str | Path, train_size: int, heldout_size: int, seed: int, spec: ArithmeticSpec | None = None
) -> dict[str, Path]:
    """Write `train.jsonl` and `heldout.jsonl` into `folder`; return their paths by split name."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    train, heldout = generate_arithmetic_splits(train_size, heldout_size, seed, spec)
    paths = {"train": folder / TRAIN_FILE, "heldout": folder / HELDOUT_FILE}
    for name, rows in (("train", train), ("heldout", heldout)):
        paths[name].write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return paths


def write_default_dataset(folder: str | Path) -> dict[str, Path]:
    """Write the embedded default's dataset (`DEFAULT_TRAIN_SIZE` / `DEFAULT_HELDOUT_SIZE` rows of `DEFAULT_SPEC`,
    seed `DEFAULT_DATASET_SEED`) into `folder`; return its paths by split name."""
    return write_arithmetic_dataset(
        folder, DEFAULT_TRAIN_SIZE, DEFAULT_HELDOUT_SIZE, DEFAULT_DATASET_SEED, DEFAULT_SPEC
    )
