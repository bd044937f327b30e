"""The synthetic arithmetic dataset: correct rows, seeded, disjoint splits, and GSM8K-loadable files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_recipes.embedded import ArithmeticSpec, format_row, generate_arithmetic_splits, write_arithmetic_dataset
from rl_recipes.rewards import gsm8k_exact_match
from rl_recipes.tasks import load_math_dataset


def test_format_row() -> None:
    assert format_row((23, "+", 58)) == {"question": "What is 23 + 58?", "answer": "23 + 58 = 81 #### 81"}
    assert format_row((3, "-", 5)) == {"question": "What is 3 - 5?", "answer": "3 - 5 = -2 #### -2"}
    assert format_row((7, "*", 6))["answer"] == "7 * 6 = 42 #### 42"


@pytest.mark.parametrize("spec", [ArithmeticSpec(), ArithmeticSpec(("+", "-", "*"), 0, 9, allow_negative=True)])
def test_splits_are_disjoint_seeded_and_correct(spec: ArithmeticSpec) -> None:
    train, heldout = generate_arithmetic_splits(150, 50, seed=3, spec=spec)
    assert len(train) == 150 and len(heldout) == 50
    questions = [row["question"] for row in train + heldout]
    assert len(set(questions)) == len(questions)  # distinct, so no question is in both splits
    assert generate_arithmetic_splits(150, 50, seed=3, spec=spec) == (train, heldout)
    assert generate_arithmetic_splits(150, 50, seed=4, spec=spec) != (train, heldout)
    for row in train + heldout:
        a, op, b = row["question"].removeprefix("What is ").removesuffix("?").split()
        assert op in spec.operations and spec.min_operand <= int(a) <= spec.max_operand
        assert gsm8k_exact_match(row["answer"], str(eval(f"{a} {op} {b}"))) == 1.0
        if not spec.allow_negative:
            assert "#### -" not in row["answer"]


def test_whole_space_is_enumerated() -> None:
    spec = ArithmeticSpec(("+", "-"), 0, 2)
    assert spec.num_problems() == 9 + 6
    train, heldout = generate_arithmetic_splits(10, 5, seed=0, spec=spec)
    assert len({row["question"] for row in train + heldout}) == 15


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: generate_arithmetic_splits(10, 6, 0, ArithmeticSpec(("+", "-"), 0, 2)), "only 15; widen the ranges"),
        (lambda: generate_arithmetic_splits(-1, 5, 0), "split sizes must be >= 0"),
        (lambda: ArithmeticSpec(("/",)), "operations must be a non-empty subset"),
        (lambda: ArithmeticSpec(min_operand=5, max_operand=4), "need 0 <= min_operand <= max_operand"),
    ],
)
def test_rejections(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]


def test_written_files_load_as_gsm8k(tmp_path: Path) -> None:
    paths = write_arithmetic_dataset(tmp_path / "data", train_size=20, heldout_size=8, seed=1)
    train, heldout = load_math_dataset(paths["train"]), load_math_dataset(paths["heldout"])
    assert (len(train), len(heldout)) == (20, 8)
    assert train[0].ground_truth == train[0].answer.rsplit("#### ", 1)[1]


def test_default_dataset_is_fixed(tmp_path: Path) -> None:
    from rl_recipes.embedded import DEFAULT_HELDOUT_SIZE, DEFAULT_SPEC, DEFAULT_TRAIN_SIZE, write_default_dataset

    first = write_default_dataset(tmp_path / "a")
    second = write_default_dataset(tmp_path / "b")
    train, heldout = load_math_dataset(first["train"]), load_math_dataset(first["heldout"])
    assert (len(train), len(heldout)) == (DEFAULT_TRAIN_SIZE, DEFAULT_HELDOUT_SIZE)
    assert not {s.question for s in train} & {s.question for s in heldout}
    operands = [int(x) for s in train + heldout for x in s.question.removeprefix("What is ").rstrip("?").split()[::2]]
    assert max(operands) == DEFAULT_SPEC.max_operand == 49 and min(operands) == 0
    for split in ("train", "heldout"):  # the same rows on every call: SFT and RL share the held-out split
        assert first[split].read_text() == second[split].read_text()
