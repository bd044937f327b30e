"""Resolving `rollout.workflow`: a registered name, `pkg.mod:Name` or `path/to/file.py:Name`, built with kwargs.

The same three forms as reward functions (`rl_recipes.rewards.load_reward_function`); the runtime calls
`load_workflow` when it checks the config (so a bad spec fails at load time) and again inside each rollout
worker (so the workflow object never has to pickle).
"""
# pyright: reportUnnecessaryIsInstance=false
# (the checks guard values from user code and YAML, whatever their annotations say)

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from rl_core._errors import RLCoreError, UnknownNameError
from rl_core.workflows._protocols import RolloutWorkflow
from rl_core.workflows._registry import WorkflowFactory, get_workflow

_SPEC_FORMS = "a registered name, a dotted path 'pkg.mod:Name', or a file path 'path/to/file.py:Name'"
_FILE_MODULE_PREFIX = "_rl_core_workflow_file_"


class WorkflowLoadError(RLCoreError, ValueError):
    """A workflow spec does not resolve to a usable workflow; the message names the spec and the fix."""


def resolve_workflow(spec: str) -> WorkflowFactory:
    """The class or factory `spec` names (see the module doc); `WorkflowLoadError` when it names nothing usable."""
    if not isinstance(spec, str) or not spec:
        raise WorkflowLoadError(f"workflow spec must be a non-empty string, got {spec!r}; give {_SPEC_FORMS}")
    if ":" not in spec:
        try:
            return get_workflow(spec)
        except UnknownNameError as exc:
            raise WorkflowLoadError(f"workflow spec {spec!r}: {exc}; or give {_SPEC_FORMS}") from None
    location, _, attribute = spec.rpartition(":")
    if not location or not attribute:
        raise WorkflowLoadError(f"workflow spec {spec!r} is malformed; give {_SPEC_FORMS}")
    is_file = location.endswith(".py") or "/" in location or "\\" in location
    module = _import_file(spec, Path(location)) if is_file else _import_module(spec, location)
    if not hasattr(module, attribute):
        candidates = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise WorkflowLoadError(
            f"workflow spec {spec!r}: {location!r} has no attribute {attribute!r}; callables defined there: "
            f"{', '.join(candidates) or 'none'}; fix the name after ':'"
        )
    factory: WorkflowFactory = getattr(module, attribute)
    if not callable(factory):
        raise WorkflowLoadError(
            f"workflow spec {spec!r} names a {type(factory).__name__}; point it at a class or function that builds "
            "a RolloutWorkflow"
        )
    return factory


def load_workflow(spec: str, kwargs: Mapping[str, Any] | None = None) -> RolloutWorkflow:
    """Build the workflow `spec` names with `kwargs` as keywords; every problem raises `WorkflowLoadError`."""
    factory = resolve_workflow(spec)
    try:
        workflow = factory(**dict(kwargs or {}))
    except TypeError as exc:
        raise WorkflowLoadError(
            f"workflow spec {spec!r}: building it with rollout.workflow_kwargs={dict(kwargs or {})!r} failed: {exc}; "
            "give the keywords its constructor takes"
        ) from exc
    arun = getattr(workflow, "arun_episode", None)
    if arun is None or not inspect.iscoroutinefunction(arun):
        raise WorkflowLoadError(
            f"workflow spec {spec!r} built a {type(workflow).__name__} without an 'async def arun_episode(engine, "
            "data)'; a RolloutWorkflow needs that coroutine method"
        )
    return workflow


def _import_module(spec: str, name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise WorkflowLoadError(
            f"workflow spec {spec!r}: module {exc.name or name!r} not found; install the package that provides it or "
            "add its folder to PYTHONPATH (for a file, give 'path/to/file.py:Name')"
        ) from exc
    except Exception as exc:
        raise WorkflowLoadError(
            f"workflow spec {spec!r}: importing {name!r} failed with {type(exc).__name__}: {exc}; fix that module"
        ) from exc


def _import_file(spec: str, path: Path) -> ModuleType:
    if not path.is_file():
        raise WorkflowLoadError(
            f"workflow spec {spec!r}: file {str(path)!r} not found (resolved to {str(path.resolve())!r}); check the "
            "path, which is relative to the working directory (give an absolute path for Ray workers)"
        )
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_name = f"{_FILE_MODULE_PREFIX}{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise WorkflowLoadError(f"workflow spec {spec!r}: {str(path)!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise WorkflowLoadError(
            f"workflow spec {spec!r}: running {str(path)!r} failed with {type(exc).__name__}: {exc}; fix that file"
        ) from exc
    return module
