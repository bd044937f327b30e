"""Preference pairs: read from a jsonl (`prompt`, `chosen`, `rejected`), or generated from the arithmetic task."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rl_recipes._errors import RecipeError
from rl_recipes.embedded import DEFAULT_SPEC, generate_arithmetic_splits

PAIR_FIELDS = ("prompt", "chosen", "rejected")
"""The fields of every jsonl row: the question, the preferred response and the other one."""
_ANSWER = re.compile(r"^(?P<lhs>.*= )(?P<result>-?\d+) #### (?P<final>-?\d+)$")
_MAX_OFFSET = 10
"""A generated wrong result is off by 1..10."""


class PreferenceDataError(RecipeError, ValueError):
    """A preference file is missing, empty, or has a row without a text `prompt`, `chosen` or `rejected`."""


@dataclass(frozen=True)
class PreferencePair:
    """One comparison: a prompt (the question), the preferred response and the other one (texts)."""

    prompt: str
    chosen: str
    rejected: str


def load_pairs(path: str | Path) -> list[PreferencePair]:
    """The pairs of jsonl file `path`; `PreferenceDataError` names the file, the line and the field at fault."""
    file = Path(path)
    if not file.is_file():
        raise PreferenceDataError(f"preference file {str(file)!r} does not exist; give a jsonl of {PAIR_FIELDS}")
    pairs = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise PreferenceDataError(f"{where}: not a JSON object ({error.msg})") from None
        if not isinstance(row, dict):
            raise PreferenceDataError(f"{where}: expected a JSON object with {PAIR_FIELDS}, found {type(row).__name__}")
        values = []
        for name in PAIR_FIELDS:
            value = row.get(name)
            if not isinstance(value, str) or not value:
                found = "missing" if name not in row else f"{value!r} ({type(value).__name__})"
                raise PreferenceDataError(
                    f"{where}: field {name!r} is {found}, expected non-empty text (fields: {', '.join(row) or 'none'})"
                )
            values.append(value)
        pairs.append(PreferencePair(*values))
    if not pairs:
        raise PreferenceDataError(f"preference file {str(file)!r} holds no pairs; add jsonl rows with {PAIR_FIELDS}")
    return pairs


def write_pairs(pairs: Sequence[PreferencePair], path: str | Path) -> Path:
    """Write `pairs` as jsonl rows to `path`; return it."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    rows = ({"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs)
    file.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return file


def wrong_answer(answer: str, rng: random.Random) -> str:
    """A worse response than `answer` (`"23 + 58 = 81 #### 81"`), one of two kinds at random: the result off by
    1..10 in both places (wrong arithmetic), or the final `#### N` dropped (no answer to grade); results stay >= 0."""
    match = _ANSWER.match(answer)
    if match is None:
        raise PreferenceDataError(f"cannot make a wrong answer from {answer!r}; expected 'a op b = r #### r'")
    result = int(match["result"])
    if rng.random() < 0.5:
        return f"{match['lhs']}{result}"
    offsets = [offset for offset in range(-_MAX_OFFSET, _MAX_OFFSET + 1) if offset and result + offset >= 0]
    wrong = result + rng.choice(offsets)
    return f"{match['lhs']}{wrong} #### {wrong}"


def generate_math_pairs(train: int, heldout: int, seed: int) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(train, held-out) pairs on distinct embedded arithmetic problems: the correct answer over a wrong one."""
    rng = random.Random(seed)
    train_rows, heldout_rows = generate_arithmetic_splits(train, heldout, seed, DEFAULT_SPEC)

    def pairs(rows: list[dict[str, str]]) -> list[PreferencePair]:
        return [PreferencePair(row["question"], row["answer"], wrong_answer(row["answer"], rng)) for row in rows]

    return pairs(train_rows), pairs(heldout_rows)
