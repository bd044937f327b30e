"""Resolving a plug-in spec `pkg.mod:name` or `path/to/file.py:name` to the object it names.

Reward functions (`rl_recipes.rewards`) and rollout workflows (`rl_core.workflows`) take the same spec forms
beside their registered names; this is their one loader.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

_FILE_MODULE_PREFIX = "_rl_spec_file_"
"""One module name per file (`<prefix><stem>_<digest>`), so a file loads once per process and what it defines stays
picklable by reference there."""


def import_from_spec(
    spec: str, *, what: str, forms: str, error: Callable[[str], Exception], placeholder: str = "name"
) -> Any:
    """The object `spec` names: `pkg.mod:name` imports `pkg.mod`, `path/to/file.py:name` runs that file (a path
    relative to the working directory); then its attribute `name`.

    Every problem raises `error(message)`, the message starting `"{what} spec {spec!r}"` and naming the fix:
    a malformed spec (`forms` lists the accepted ones), a module or file not found, an import or the file failing
    (the cause chained), or no attribute `name` (the callables defined there are listed). `placeholder` names the
    attribute in the hints (`fn`, `Name`). The object is the user's, of whatever type: the caller checks it."""
    location, _, attribute = spec.rpartition(":")
    if not location or not attribute:
        raise error(f"{what} spec {spec!r} is malformed; give {forms}")
    is_file = location.endswith(".py") or "/" in location or "\\" in location
    prefix = f"{what} spec {spec!r}"
    if is_file:
        module = _import_file(prefix, Path(location), error)
    else:
        module = _import_module(prefix, location, error, placeholder)
    if not hasattr(module, attribute):
        candidates = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise error(
            f"{prefix}: {location!r} has no attribute {attribute!r}; callables defined there: "
            f"{', '.join(candidates) or 'none'}; fix the name after ':'"
        )
    return getattr(module, attribute)


def _import_module(prefix: str, name: str, error: Callable[[str], Exception], placeholder: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise error(
            f"{prefix}: module {exc.name or name!r} not found; install the package that provides it or add its "
            f"folder to PYTHONPATH (for a file, give 'path/to/file.py:{placeholder}')"
        ) from exc
    except Exception as exc:
        raise error(
            f"{prefix}: importing {name!r} failed with {type(exc).__name__}: {exc}; fix the error in that module"
        ) from exc


def _import_file(prefix: str, path: Path, error: Callable[[str], Exception]) -> ModuleType:
    if not path.is_file():
        raise error(
            f"{prefix}: file {str(path)!r} not found (resolved to {str(path.resolve())!r}); check the path, which is "
            "relative to the working directory (give an absolute path for Ray workers on other machines)"
        )
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_name = f"{_FILE_MODULE_PREFIX}{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise error(f"{prefix}: {str(path)!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise error(
            f"{prefix}: running {str(path)!r} failed with {type(exc).__name__}: {exc}; fix the error in that file"
        ) from exc
    return module
