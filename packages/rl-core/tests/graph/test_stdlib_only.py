"""rl_core.graph needs nothing but the standard library: not torch, not anything else."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import rl_core
import rl_core.graph

GRAPH_DIR = Path(rl_core.graph.__file__).parent
GRAPH_MODULES = sorted(f"rl_core.graph.{info.name}" for info in pkgutil.iter_modules([str(GRAPH_DIR)]))
# The rl-core helpers the graph modules may use besides their own package.
ALLOWED_RL_CORE = {"rl_core._errors", "rl_core._registry"}

_PROBE = textwrap.dedent(
    """
    import importlib, importlib.abc, json, sys, types

    class BlockNonStdlib(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            root = name.partition(".")[0]
            if root != "rl_core" and root not in sys.stdlib_module_names:
                raise ImportError(f"blocked import of {name!r}: rl_core.graph must need only the standard library")
            return None

    sys.meta_path.insert(0, BlockNonStdlib())
    # A bare rl_core package, so that rl_core/__init__.py (free to import torch) does not run.
    package = types.ModuleType("rl_core")
    package.__path__ = [ROOT]
    sys.modules["rl_core"] = package
    for name in MODULES:
        importlib.import_module(name)
    graph = importlib.import_module("rl_core.graph")
    result = graph.split_graph(graph.get_pipeline("ppo"))
    print(json.dumps({"torch": "torch" in sys.modules, "order": list(result.subgraphs[0].topological_order)}))
    """
)


def test_graph_imports_with_every_non_stdlib_module_blocked() -> None:
    probe = f"ROOT = {str(Path(rl_core.__file__).parent)!r}\nMODULES = {GRAPH_MODULES!r}\n{_PROBE}"
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report == {
        "torch": False,
        "order": [
            "rollout_actor",
            "function_reward",
            "compute_value",
            "calculate_advantages",
            "actor_old_log_prob",
            "reference_log_prob",
            "actor_train",
            "critic_train",
        ],
    }


def test_the_probe_really_blocks_torch() -> None:
    probe = f"ROOT = {str(Path(rl_core.__file__).parent)!r}\nMODULES = ['torch']\n{_PROBE}"
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert completed.returncode != 0
    assert "blocked import of 'torch'" in completed.stderr


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for statement in ast.walk(ast.parse(path.read_text())):
        if isinstance(statement, ast.Import):
            names.update(alias.name for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom):
            assert statement.level == 0, f"{path.name} uses a relative import"
            names.add(statement.module or "")
    return names


def test_every_import_statement_is_stdlib_or_allowed_rl_core() -> None:
    # Also catches imports inside functions, which an import-time probe would not run.
    assert len(GRAPH_MODULES) >= 8
    for path in sorted(GRAPH_DIR.glob("*.py")):
        for name in _imported_modules(path):
            root = name.partition(".")[0]
            allowed = root in sys.stdlib_module_names or name.startswith("rl_core.graph") or name in ALLOWED_RL_CORE
            assert allowed, f"{path.name} imports {name}"
