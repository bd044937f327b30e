"""Every benchmark script imports against the packages as they are now.

The benchmarks reach into some private modules (a bench replaces a node operation with its own workload, or times
a private step), and no package test runs them, so a rename broke `bench/async.py` at import once without a test
failing. Importing each script (its `main` runs only under `__main__`) catches that in lint, in about a second. A
third-party module a bench needs beyond the packages' own dependencies (tensordict for `batch_container.py`) skips
that script; a missing module or name of ours fails."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
OURS = ("rl_core", "rl_engines", "rl_coordinator", "rl_runtime", "rl_recipes")


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda path: path.name)
def test_the_benchmark_script_imports(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the scripts import their `_helpers` as top-level modules
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as error:
        top = (error.name or "").split(".")[0]
        if top in OURS or (BENCH / f"{top}.py").exists():
            raise
        pytest.skip(f"{script.name} needs {error.name}, which the packages do not depend on")
