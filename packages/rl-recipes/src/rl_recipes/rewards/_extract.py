"""Final-answer extraction and numeric equivalence for GSM8K-style answers."""

from __future__ import annotations

import math
import re

ANSWER_MARKER = "####"
"""GSM8K puts the final answer after this marker: `... #### 72`."""

# A number: optional sign (not glued to a preceding word or digit, so `5-3` reads as 5 and 3), then either
# comma-grouped thousands (`1,234`) or plain digits, then an optional decimal part; or a bare `.5`.
_NUMBER = re.compile(r"(?:(?<![\w.])[-+])?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?:(?<![\w.])[-+])?\.\d+")
_FORMAT = re.compile(ANSWER_MARKER + r"\s*[-+]?(?:\d[\d,]*)?\.?\d")

ABS_TOLERANCE = 1e-6
"""Two answers match when they differ by at most this much absolutely ..."""
REL_TOLERANCE = 1e-6
"""... or by at most this fraction of the larger one (so `0.1 + 0.2` equals `0.3`, and 1e12 vs 1e12+1 too)."""


def normalize_number(text: str) -> str:
    """Return `text` (one number) in canonical form: no commas, no leading `+`, no trailing `.0`/`.00`."""
    number = text.strip().replace(",", "").lstrip("+")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    if number.startswith("."):
        number = "0" + number
    elif number.startswith("-."):
        number = "-0" + number[1:]
    if number in ("", "-", "-0"):
        return "0"
    return number


def extract_answer(text: str) -> str | None:
    """Extract the final numeric answer of `text`, normalised, or None when it holds no number.

    The answer is the first number after the last `####`; without a `####` (or with nothing numeric
    after it) it is the last number anywhere in the text.
    """
    if ANSWER_MARKER in text:
        after = _NUMBER.search(text.rsplit(ANSWER_MARKER, 1)[1])
        if after is not None:
            return normalize_number(after.group(0))
    numbers = _NUMBER.findall(text)
    return normalize_number(numbers[-1]) if numbers else None


def has_answer_format(text: str) -> bool:
    """Whether `text` contains an answer in the `#### N` format."""
    return _FORMAT.search(text) is not None


def numbers_match(predicted: str, reference: str) -> bool:
    """Whether two normalised numbers are equal within `ABS_TOLERANCE` or `REL_TOLERANCE`."""
    try:
        a, b = float(predicted), float(reference)
    except ValueError:
        return predicted == reference
    return math.isclose(a, b, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)
