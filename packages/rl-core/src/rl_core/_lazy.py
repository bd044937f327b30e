"""A package `__init__` that re-exports names whose modules import a heavy or optional dependency, on first use.

rl-coordinator's and rl-runtime's Ray-backed names (the coordinator actor, the DAG workers' driver) are imported
only when asked for, so a process without Ray (a torchrun rank) imports the rest of those packages.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` (PEP 562) for `package` that imports `package.<modules[name]>` when `name` is
    first asked for, caches it in the package and returns it; any other name raises AttributeError.

        _NEED_RAY = {"Driver": "_driver", "start_workers": "_worker"}
        __getattr__ = lazy_exports(__name__, _NEED_RAY)

    Args:
        package: the package's `__name__`.
        modules: each lazily exported name -> the submodule (relative to `package`) that defines it.
    """
    table = dict(modules)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
