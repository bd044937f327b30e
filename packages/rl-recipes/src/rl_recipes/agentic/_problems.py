"""The agentic recipe's task data: additions of large operands the tiny model cannot do in its head, as rows
(question, answer, the opening messages) and as tool-using demonstrations (the conversation an expert would have)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from rl_runtime.config._validators import int_at_least

QUESTION_FIELD, ANSWER_FIELD, MESSAGES_FIELD = "question", "answer", "messages"
"""Row fields: the question text, the exact answer (digits) and the opening chat messages (one user turn)."""
CALCULATOR = "calculator"
TRAIN_FILE, HELDOUT_FILE = "train.jsonl", "heldout.jsonl"


@attrs.frozen
class ProblemSpec:
    """Which additions the task asks: operands of `min_digits..max_digits` digits, `train_size` training and
    `heldout_size` held-out questions (disjoint), drawn with `seed`."""

    min_digits: int = attrs.field(default=4, validator=int_at_least(1))
    """Fewest digits of an operand."""
    max_digits: int = attrs.field(default=5, validator=int_at_least(1))
    """Most digits of an operand."""
    train_size: int = attrs.field(default=2000, validator=int_at_least(1))
    """Training questions."""
    heldout_size: int = attrs.field(default=64, validator=int_at_least(1))
    """Held-out questions (never trained on, neither in the warm start nor in RL)."""
    seed: int = attrs.field(default=0, validator=int_at_least(0))
    """Seed of the question draw."""

    def __attrs_post_init__(self) -> None:
        if self.max_digits < self.min_digits:
            raise ValueError(
                f"task.problems.max_digits={self.max_digits} is below min_digits={self.min_digits}; raise max_digits"
            )


def question_text(a: int, b: int) -> str:
    """The user's question about `a + b`."""
    return f"What is {a} + {b}?"


def problem_row(a: int, b: int) -> dict[str, Any]:
    """A dataset row: question, answer (digits) and the opening messages the `tool_calling` workflow starts from."""
    question = question_text(a, b)
    return {
        QUESTION_FIELD: question,
        ANSWER_FIELD: str(a + b),
        MESSAGES_FIELD: [{"role": "user", "content": question}],
    }


def _operand(rng: random.Random, spec: ProblemSpec) -> int:
    digits = rng.randint(spec.min_digits, spec.max_digits)
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def generate_problems(spec: ProblemSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training rows, held-out rows): distinct operand pairs, none shared between the two splits."""
    rng = random.Random(spec.seed)
    seen: set[tuple[int, int]] = set()
    pairs: list[tuple[int, int]] = []
    wanted = spec.train_size + spec.heldout_size
    for _ in range(100 * wanted):
        if len(pairs) == wanted:
            break
        pair = (_operand(rng, spec), _operand(rng, spec))
        if pair not in seen:
            seen.add(pair)
            pairs.append(pair)
    if len(pairs) < wanted:
        raise ValueError(
            f"task.problems: only {len(pairs)} distinct additions of {spec.min_digits}..{spec.max_digits}-digit "
            f"operands, {wanted} wanted; lower train_size/heldout_size or allow more digits"
        )
    rows = [problem_row(a, b) for a, b in pairs]
    return rows[: spec.train_size], rows[spec.train_size :]


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write `rows` as JSON lines to `path` (its folder made); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON-lines rows of `path`."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def expression_of(question: str) -> str:
    """The arithmetic of a question written by `question_text` ("What is 12 + 34?" -> "12 + 34")."""
    return question.removeprefix("What is ").removesuffix("?")


def tool_call_text(expression: str) -> str:
    """The Hermes-style `<tool_call>` an expert writes to compute `expression` with the calculator."""
    call = {"name": CALCULATOR, "arguments": {"expression": expression}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def demonstration(row: dict[str, Any], *, direct: bool = False) -> list[dict[str, str]]:
    """The expert's conversation for `row`: the question, a calculator call, the tool's result, the answer; with
    `direct`, the question and the answer alone (an expert who adds in its head, which the tiny model cannot)."""
    answer = str(row[ANSWER_FIELD])
    if direct:
        return [*row[MESSAGES_FIELD], {"role": "assistant", "content": answer}]
    return [
        *row[MESSAGES_FIELD],
        {"role": "assistant", "content": tool_call_text(expression_of(str(row[QUESTION_FIELD])))},
        {"role": "tool", "content": answer},
        {"role": "assistant", "content": answer},
    ]
