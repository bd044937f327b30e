"""Load a config class from a YAML file plus dotted overrides, and dump one back to plain data or YAML."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from rl_core import load_plugins, nearest_name
from rl_runtime.config._converter import structure, unstructure
from rl_runtime.config._errors import ConfigError, ConfigProblem, describe_value
from rl_runtime.config._overrides import apply_overrides
from rl_runtime.config._yaml import dump_yaml, parse_yaml

T = TypeVar("T")

logger = logging.getLogger(__name__)

_DEFAULTS_PACKAGE = "rl_runtime.config"
_DEFAULTS_FOLDER = "defaults"
_CONFIG_SUFFIX = ".yaml"


def _describe_source(yaml_path: Path | None, overrides: Sequence[str]) -> str:
    parts = [str(yaml_path)] if yaml_path is not None else []
    if overrides:
        parts.append(f"overrides {list(overrides)}")
    return " with ".join(parts)


def read_config_file(yaml_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The raw mapping in a YAML config file (an empty file is an empty mapping)."""
    path = Path(yaml_path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problem = ConfigProblem("", "a readable YAML file", f"{type(exc).__name__}: {exc.strerror or exc}")
        raise ConfigError([problem], str(path)) from None
    data = parse_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            [ConfigProblem("", "a mapping of sections at the top level", describe_value(data))], str(path)
        )
    return dict(data)


def config_from_dict(cls: type[T], data: Mapping[str, Any], overrides: Sequence[str] = (), source: str = "") -> T:
    """Build `cls` from a raw mapping with `overrides` applied; raises `ConfigError` listing every problem."""
    # Registered names are checked while structuring; plugins must have registered theirs first.
    load_plugins()
    merged = apply_overrides(data, overrides, cls)
    return structure(merged, cls, source or _describe_source(None, overrides))


def load_config(cls: type[T], yaml_path: str | os.PathLike[str] | None, overrides: Sequence[str] = ()) -> T:
    """Build `cls` from a YAML file (or only defaults when None) with dotted `overrides` applied in order."""
    path = Path(yaml_path) if yaml_path is not None else None
    raw = read_config_file(path) if path is not None else {}
    config = config_from_dict(cls, raw, overrides, _describe_source(path, overrides))
    logger.debug("loaded %s from %s", cls.__name__, _describe_source(path, overrides) or "defaults")
    return config


def dump_config(config: object) -> dict[str, Any]:
    """`config` as plain data (dicts, lists, str, numbers, bools, None) that `config_from_dict` reads back equal."""
    data = unstructure(config)
    if not isinstance(data, dict):
        raise TypeError(f"dump_config takes a config object (an attrs class or dataclass), got {type(config).__name__}")
    return data


def dump_config_yaml(config: object) -> str:
    """`config` as YAML text that `load_config` reads back equal."""
    return dump_yaml(dump_config(config))


def default_config_path(name: str) -> Path:
    """The packaged example config `name` (e.g. "grpo_tiny"); an unknown name lists the available ones."""
    folder = resources.files(_DEFAULTS_PACKAGE) / _DEFAULTS_FOLDER
    available = sorted(
        entry.name[: -len(_CONFIG_SUFFIX)] for entry in folder.iterdir() if entry.name.endswith(_CONFIG_SUFFIX)
    )
    if name not in available:
        near = nearest_name(name, available)
        fix = f"did you mean {near!r}?" if near else f"use one of: {', '.join(available)}"
        raise ConfigError([ConfigProblem("", f"a packaged config ({', '.join(available)})", repr(name), fix)])
    return Path(str(folder / f"{name}{_CONFIG_SUFFIX}"))
