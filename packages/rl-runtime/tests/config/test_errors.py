"""ConfigError and ConfigProblem: message layout, path prefixes, and pickling across processes."""

from __future__ import annotations

import pickle

import pytest

from rl_runtime import RLRuntimeError
from rl_runtime.config import ConfigError, ConfigProblem


def test_one_problem_reads_as_one_line() -> None:
    error = ConfigError([ConfigProblem("actor.optimizer.lr", "a float > 0", "-1.0 (float)", "use 1e-6")], "run.yaml")
    assert (
        str(error)
        == "invalid configuration in run.yaml: actor.optimizer.lr: expected a float > 0, found -1.0 (float); use 1e-6"
    )


def test_several_problems_are_listed() -> None:
    error = ConfigError([ConfigProblem("a", "x", "y"), ConfigProblem("", "a mapping", "[] (list)")])
    assert str(error).splitlines() == [
        "2 problems in the configuration:",
        "  - a: expected x, found y",
        "  - <config>: expected a mapping, found [] (list)",
    ]


def test_under_prefixes_every_path() -> None:
    error = ConfigError([ConfigProblem("lr", "e", "f"), ConfigProblem("", "e", "f")]).under("actor.optimizer")
    assert [problem.path for problem in error.problems] == ["actor.optimizer.lr", "actor.optimizer"]
    assert ConfigProblem("lr", "e", "f").under("") == ConfigProblem("lr", "e", "f")


def test_is_a_runtime_error_and_a_value_error_and_pickles() -> None:
    error = ConfigError([ConfigProblem("a", "x", "y", "z")], "src")
    assert isinstance(error, RLRuntimeError) and isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert copy.problems == error.problems and copy.source == "src" and str(copy) == str(error)
    with pytest.raises(ConfigError, match=r"^invalid configuration in other: a: expected x"):
        raise error.from_source("other")
