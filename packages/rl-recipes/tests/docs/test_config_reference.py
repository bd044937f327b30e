"""The configuration reference page (docs/reference/configuration.md) is the config classes as `--help` prints them:
generated, never hand-copied, and a field missing from it fails here."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union

import attrs

from rl_recipes.cli import build_parser, config_reference
from rl_recipes.recipes import RecipeConfig
from rl_recipes.sft import SFTConfig

PAGE = Path(__file__).resolve().parents[4] / "docs" / "reference" / "configuration.md"


def _config_class(tp: Any) -> type | None:
    if typing.get_origin(tp) in (Union, types.UnionType):
        members = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        tp = members[0] if len(members) == 1 else None
    return tp if isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp)) else None


def _paths(cls: type, prefix: str = "") -> Iterator[str]:
    """Every init field's dotted path, walked independently of the generator (attrs and dataclass fields)."""
    hints = typing.get_type_hints(cls)
    names = (
        [f.name for f in attrs.fields(cls) if f.init]
        if attrs.has(cls)
        else [f.name for f in dataclasses.fields(cls) if f.init]
    )
    for name in names:
        yield f"{prefix}{name}"
        nested = _config_class(hints[name])
        if nested is not None:
            yield from _paths(nested, f"{prefix}{name}.")


def test_the_committed_page_is_what_the_generator_writes() -> None:
    assert PAGE.read_text() == config_reference(), "regenerate it: python tools/gen_config_reference.py"


def test_every_field_of_both_configs_is_on_the_page() -> None:
    page = config_reference()
    paths = [*_paths(RecipeConfig), *_paths(SFTConfig)]
    assert len(paths) > 150  # the walk found the nested sections too
    missing = [p for p in paths if f"| `{p}` |" not in page and f" `{p}`\n" not in page]
    assert not missing, f"fields missing from the configuration reference: {missing}"


def test_every_field_train_help_prints_is_on_the_page_with_its_default() -> None:
    subparsers = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    epilog = subparsers["train"].epilog
    page = config_reference()
    rows = [line.strip() for line in epilog.splitlines()[1:] if " = " in line]
    assert len(rows) > 100
    for row in rows:
        path, rest = row.split(" = ", 1)
        default = rest.split("  ")[0].split(" ", 1)[0] if rest else rest
        assert f"| `{path}` | `{default}" in page or f"| `{path}` | `` {default}" in page, row
