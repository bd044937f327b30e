"""A strict YAML reader for configs: safe, refuses duplicate keys, reads `1e-6` as a float, errors name the line."""

from __future__ import annotations

import re
from typing import Any

import yaml

from rl_runtime.config._errors import ConfigError, ConfigProblem

# PyYAML follows YAML 1.1, where `1e-6` (no dot) is a str; every config writes learning rates that way,
# so floats are resolved with the YAML 1.2 core-schema pattern instead.
_FLOAT_PATTERN = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.VERBOSE,
)
_FLOAT_TAG = "tag:yaml.org,2002:float"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 floats and duplicate keys refused."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first set on line {seen[key]})", key_node.start_mark
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _StrictDumper(yaml.SafeDumper):
    """SafeDumper that quotes every str the loader would read as a float (`"1e-6"` stays a str)."""


# Resolvers are looked up by first character; swap the float one for the 1.2 pattern in both directions.
for _cls in (_StrictLoader, _StrictDumper):
    _cls.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _FLOAT_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _cls.add_implicit_resolver(_FLOAT_TAG, _FLOAT_PATTERN, list("-+0123456789."))


def parse_yaml(text: str, source: str) -> Any:
    """Parse `text`; a syntax error raises `ConfigError` naming `source`, the line and the column."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "an unknown line"
        found = f"{exc.problem or exc.context} at {where}"
        problem = ConfigProblem("", "well-formed YAML", found, "fix the syntax there")
        raise ConfigError([problem], source) from None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem("", "well-formed YAML", str(exc))], source) from None


def dump_yaml(data: Any) -> str:
    """`data` (plain dicts, lists and scalars) as block-style YAML that `parse_yaml` reads back equal."""
    return yaml.dump(data, Dumper=_StrictDumper, sort_keys=False, default_flow_style=False, allow_unicode=True)
