"""The reward plug-in point: each way to name a function, and each error path with its message."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from rl_recipes.rewards import RewardLoadError, gsm8k_exact_match, load_reward_function


@pytest.fixture
def reward_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_reward.py"
    path.write_text(
        "def good(response_text, ground_truth, **extra):\n    return 1.0\n"
        "def two_args(response_text, ground_truth):\n    return 1.0\n"
        "def one_arg(response_text, **extra):\n    return 1.0\n"
        "def three_args(response_text, ground_truth, tests):\n    return 1.0\n"
        "NOT_CALLABLE = 3\n"
    )
    return path


def test_registered_name() -> None:
    assert load_reward_function("gsm8k_exact_match") is gsm8k_exact_match


def test_unknown_registered_name_lists_valid_names_and_forms() -> None:
    with pytest.raises(RewardLoadError, match=r"'gsm8k_exact'.*did you mean 'gsm8k_exact_match'.*'pkg.mod:fn'"):
        load_reward_function("gsm8k_exact")


def test_dotted_path() -> None:
    assert load_reward_function("rl_recipes.rewards:gsm8k_exact_match") is gsm8k_exact_match


def test_file_path(reward_file: Path) -> None:
    fn = load_reward_function(f"{reward_file}:good")
    assert fn("a", "b") == 1.0
    assert load_reward_function(f"{reward_file}:good") is fn  # the file is imported once


def test_documented_two_argument_form_drops_the_extras(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text("def reward(response, ground_truth):\n    return float(response == ground_truth)\n")
    fn = load_reward_function(f"{path}:reward")
    assert fn("7", "7", source="gsm8k", index=3) == 1.0
    assert fn("7", "8") == 0.0


def test_extras_form_receives_the_extras(tmp_path: Path) -> None:
    path = tmp_path / "extras.py"
    path.write_text("def reward(response, ground_truth, **extra):\n    return float(extra['bonus'])\n")
    assert load_reward_function(f"{path}:reward")("a", "b", bonus=2) == 2.0


def test_module_not_found() -> None:
    with pytest.raises(RewardLoadError, match=r"'no_such_pkg.rewards:fn'.*module 'no_such_pkg' not found.*PYTHONPATH"):
        load_reward_function("no_such_pkg.rewards:fn")


def test_module_import_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "broken_reward_mod.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RewardLoadError, match=r"importing 'broken_reward_mod' failed with RuntimeError: boom"):
        load_reward_function("broken_reward_mod:fn")


def test_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    with pytest.raises(RewardLoadError, match=r"file '.*nope.py' not found.*check the path"):
        load_reward_function(f"{missing}:fn")


def test_file_fails_to_run(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("x = 1 / 0\n")
    with pytest.raises(RewardLoadError, match=r"running '.*bad.py' failed with ZeroDivisionError"):
        load_reward_function(f"{path}:fn")


def test_attribute_missing_lists_callables(reward_file: Path) -> None:
    with pytest.raises(RewardLoadError, match=r"has no attribute 'goood'; callables defined there: good, one_arg"):
        load_reward_function(f"{reward_file}:goood")


def test_not_callable(reward_file: Path) -> None:
    with pytest.raises(RewardLoadError, match=r"names a int, which is not callable"):
        load_reward_function(f"{reward_file}:NOT_CALLABLE")


@pytest.mark.parametrize("name", ["three_args", "one_arg"])
def test_wrong_signature(reward_file: Path, name: str) -> None:
    with pytest.raises(RewardLoadError, match=r"has signature .*expected fn\(response_text: str, ground_truth: str\)"):
        load_reward_function(f"{reward_file}:{name}")


@pytest.mark.parametrize("spec", [":fn", "mod:", "a:"])
def test_malformed(spec: str) -> None:
    with pytest.raises(RewardLoadError, match="is malformed"):
        load_reward_function(spec)


def test_math_verify_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)  # makes `import math_verify` raise ImportError
    with pytest.raises(RewardLoadError, match=r"math-verify.*pip install 'rl-recipes\[math\]'"):
        load_reward_function("math_verify")


def test_math_verify_uses_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("math_verify")
    fake.parse = lambda text, parsing_timeout: text.split()[-1]  # type: ignore[attr-defined]
    fake.verify = lambda gold, answer, timeout_seconds: gold == answer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "math_verify", fake)
    fn = load_reward_function("math_verify")
    assert fn("so x = 1/2", "1/2") == 1.0
    assert fn("so x = 1/3", "1/2") == 0.0
