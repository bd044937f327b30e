"""Every benchmark script imports against the packages as they are now.

The benchmarks reach into some private modules (a bench replaces a node operation with its own workload, or times
a private step), and no package test runs them, so a rename broke `bench/async.py` at import once without a test
failing. Importing each script (its `main` runs only under `__main__`) catches that in lint, in about a second."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda path: path.name)
def test_the_benchmark_script_imports(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the scripts import their `_helpers` as top-level modules
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
