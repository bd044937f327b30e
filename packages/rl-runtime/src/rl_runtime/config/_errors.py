"""The one error a bad run configuration raises, listing every problem with its dotted path."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from rl_runtime._errors import RLRuntimeError


@attrs.frozen
class ConfigProblem:
    """One thing wrong with a configuration: where, what was expected, what was found and how to fix it."""

    path: str
    """Dotted path of the setting (`actor.optimizer.lr`, `data.train_files.0`); "" is the whole config."""
    expected: str
    """What a valid value looks like, in words."""
    found: str
    """What the configuration holds instead."""
    fix: str = ""
    """A suggested fix (the nearest valid name, a valid value); "" when there is nothing better to say."""

    def under(self, prefix: str) -> ConfigProblem:
        """This problem with `prefix` prepended to its path (for a section nested under `prefix`)."""
        if not prefix:
            return self
        return attrs.evolve(self, path=f"{prefix}.{self.path}" if self.path else prefix)

    def __str__(self) -> str:
        text = f"{self.path or '<config>'}: expected {self.expected}, found {self.found}"
        return f"{text}; {self.fix}" if self.fix else text


class ConfigError(RLRuntimeError, ValueError):
    """A run configuration is invalid; `problems` lists every problem found, each with its dotted path."""

    def __init__(self, problems: Sequence[ConfigProblem], source: str = "") -> None:
        super().__init__(tuple(problems), source)
        self.problems: tuple[ConfigProblem, ...] = tuple(problems)
        """Every problem found, in the order found."""
        self.source = source
        """Where the configuration came from (a file name, "overrides"); "" when built in code."""

    def under(self, prefix: str) -> ConfigError:
        """The same error with `prefix` prepended to every problem's path."""
        return ConfigError([problem.under(prefix) for problem in self.problems], self.source)

    def from_source(self, source: str) -> ConfigError:
        """The same error labelled with where the configuration came from."""
        return ConfigError(self.problems, source)

    def __str__(self) -> str:
        where = f" in {self.source}" if self.source else ""
        if len(self.problems) == 1:
            return f"invalid configuration{where}: {self.problems[0]}"
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        return f"{len(self.problems)} problems in the configuration{where}:\n{lines}"


def config_error(path: str, expected: str, value: object, fix: str = "") -> ConfigError:
    """A `ConfigError` with one problem: the setting at `path` holds `value` instead of `expected`."""
    return ConfigError([ConfigProblem(path, expected, describe_value(value), fix)])


_YAML_TYPE_NAMES = {"dict": "mapping", "list": "list", "tuple": "list", "NoneType": "null"}
_MAX_SHOWN_CHARS = 80
"""Long values are cut so a message stays one readable line."""


def describe_value(value: object) -> str:
    """`value` as a message shows it: its repr (cut when long) and its type in YAML words."""
    text = repr(value)
    if len(text) > _MAX_SHOWN_CHARS:
        text = text[: _MAX_SHOWN_CHARS - 3] + "..."
    kind = type(value).__name__
    return f"{text} ({_YAML_TYPE_NAMES.get(kind, kind)})"
