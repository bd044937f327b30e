"""Checks that a package's public modules import cleanly and pull in only what they should."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

_PROBE = """
import json, sys
before = set(sys.modules)
import {module}
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def public_modules(package: str) -> list[str]:
    """Names of `package` and every sub-module whose dotted path has no `_`-prefixed part."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


def modules_loaded_by_import(module: str, *, preload: tuple[str, ...] = ()) -> set[str]:
    """Import `module` in a fresh interpreter (after `preload`); return the module names it added.

    Raises `AssertionError` with the child's stderr when the import fails.
    """
    setup = "".join(f"import {name}\n" for name in preload)
    result = subprocess.run(
        [sys.executable, "-c", setup + _PROBE.format(module=module)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"importing {module} failed:\n{result.stderr}")
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def third_party(names: set[str], *, allowed: set[str]) -> set[str]:
    """The top-level packages of `names` that are neither standard library nor in `allowed`."""
    roots = {name.split(".")[0] for name in names}
    return {root for root in roots if root not in sys.stdlib_module_names and root not in allowed}
