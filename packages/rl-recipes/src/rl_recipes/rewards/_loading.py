"""The reward plug-in point: resolve a registered name, `pkg.mod:fn` or `path/to/file.py:fn` to a function."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from rl_core import UnknownNameError
from rl_recipes._errors import RecipeError
from rl_recipes.rewards._builtin import AVAILABILITY_CHECKS
from rl_recipes.rewards._registry import RewardFunction, get_reward_function

EXPECTED_SIGNATURE = "fn(response_text: str, ground_truth: str) -> float"
"""The documented form; `fn(response_text, ground_truth, **extra)` is taken too, and then gets the sample's extras."""
_SPEC_FORMS = "a registered name, a dotted path 'pkg.mod:fn', or a file path 'path/to/file.py:fn'"
_FILE_MODULE_PREFIX = "_rl_recipes_reward_file_"


class RewardLoadError(RecipeError, ValueError):
    """A reward-function spec does not resolve to a usable function; the message names the spec and the fix."""


def load_reward_function(spec: str) -> RewardFunction:
    """Return the reward function named by `spec`: a registered name, `pkg.mod:fn` or `path/to/file.py:fn`.

    The function takes `(response_text, ground_truth)` (`EXPECTED_SIGNATURE`), or that and `**extra` to receive
    the sample's extras as keywords; one without `**extra` is wrapped so the extras are dropped.
    Every problem (unknown name, module or file not found, import failure, missing attribute, not
    callable, wrong signature, missing optional package) raises `RewardLoadError` before training starts.
    """
    if ":" not in spec:
        return _load_registered(spec)
    location, _, attribute = spec.rpartition(":")
    if not location or not attribute:
        raise RewardLoadError(f"reward function spec {spec!r} is malformed; give {_SPEC_FORMS}")
    is_file = location.endswith(".py") or "/" in location or "\\" in location
    module = _import_file(spec, Path(location)) if is_file else _import_module(spec, location)
    if not hasattr(module, attribute):
        candidates = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise RewardLoadError(
            f"reward function spec {spec!r}: {location!r} has no attribute {attribute!r}; "
            f"callables defined there: {', '.join(candidates) or 'none'}; fix the name after ':'"
        )
    fn = getattr(module, attribute)
    return fn if _check_signature(spec, fn) else _DropExtras(fn)


class _DropExtras:
    """A `fn(response_text, ground_truth) -> float` seen as a `RewardFunction`: the per-sample extras are dropped."""

    def __init__(self, fn: Callable[[str, str], float]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, response_text: str, ground_truth: str, **extra: Any) -> float:
        return self.fn(response_text, ground_truth)


def _load_registered(spec: str) -> RewardFunction:
    try:
        fn = get_reward_function(spec)
    except UnknownNameError as exc:
        raise RewardLoadError(f"reward function spec {spec!r}: {exc}; or give {_SPEC_FORMS}") from None
    check = AVAILABILITY_CHECKS.get(spec)
    if check is not None:
        try:
            check()
        except ImportError as exc:
            raise RewardLoadError(f"reward function spec {spec!r}: {exc}") from exc
    return fn


def _import_module(spec: str, name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise RewardLoadError(
            f"reward function spec {spec!r}: module {exc.name or name!r} not found; install the package that "
            "provides it or add its folder to PYTHONPATH (for a file, give 'path/to/file.py:fn')"
        ) from exc
    except Exception as exc:
        raise RewardLoadError(
            f"reward function spec {spec!r}: importing {name!r} failed with {type(exc).__name__}: {exc}; "
            "fix the error in that module"
        ) from exc


def _import_file(spec: str, path: Path) -> ModuleType:
    if not path.is_file():
        raise RewardLoadError(
            f"reward function spec {spec!r}: file {str(path)!r} not found (resolved to {str(path.resolve())!r}); "
            "check the path, which is relative to the working directory"
        )
    resolved = path.resolve()
    # One module name per file, so the same file loads once and its functions stay picklable by reference.
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_name = f"{_FILE_MODULE_PREFIX}{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise RewardLoadError(f"reward function spec {spec!r}: {str(path)!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise RewardLoadError(
            f"reward function spec {spec!r}: running {str(path)!r} failed with {type(exc).__name__}: {exc}; "
            "fix the error in that file"
        ) from exc
    return module


def _check_signature(spec: str, fn: object) -> bool:
    """Refuse `fn` unless it takes `(response_text, ground_truth)`; True when it also takes `**extra`."""
    if not callable(fn):
        raise RewardLoadError(
            f"reward function spec {spec!r} names a {type(fn).__name__}, which is not callable; "
            f"point it at a function {EXPECTED_SIGNATURE}"
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True  # Some builtins hide their signature; they are checked per sample instead.
    try:
        signature.bind("", "")
    except TypeError:
        raise RewardLoadError(
            f"reward function spec {spec!r} has signature {signature}; expected {EXPECTED_SIGNATURE} "
            "(two positional arguments: the response text and the ground truth; add **extra to also receive "
            "the sample's extras as keywords)"
        ) from None
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
