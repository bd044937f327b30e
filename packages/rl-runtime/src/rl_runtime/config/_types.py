"""Type aliases shared by the schema and the converter."""

from __future__ import annotations

from typing import Union

Scalar = Union[bool, int, float, str, None]  # noqa: UP007 - a runtime alias the converter dispatches on
"""A YAML scalar: the values an algorithm's parameter mapping may hold."""
