"""Count the package boundaries one training step crosses, by tracing it.

Issue 21 asks that a batch's walk from the loader to `optimizer.step()` cross at most half of the package
boundaries it crossed before the seam redesign. This script measures that walk instead of reading it off the code:
it runs the embedded GRPO recipe for a few steps with a `sitecustomize` module on `PYTHONPATH` (Ray's workers
inherit it) that wraps each DAG worker's `GraphExecutor.run_step` (one training step: every node of the worker's
task graph) in a profile hook recording every call from one of our modules into another, on the step's thread
(work handed to other threads, such as the coordinator client's sender, is not followed). It prints:

- files: the distinct files of our five packages that the step ran code in;
- package crossings: the distinct caller-file -> callee-file call edges whose two files are in different
  packages (rl_core, rl_engines, rl_coordinator, rl_runtime, rl_recipes): each is one place where the step's
  control passes a package seam;
- the crossings per package pair.

A call counts from the nearest of our files on the stack, so a call through code defined elsewhere (a
`@torch.no_grad()` wrapper, a dataclass's generated `__init__` running our `__post_init__`, autograd running our
backward) still counts as a crossing of the file that made it. The last line, `SEAM_WALK_DIRECT`, counts only calls
whose immediate caller is ours: how the walk was counted up to 2026-11-27 (17 crossings then, 24 counted through
wrappers), kept so the numbers in docs/architecture.md's history stay comparable.

Calls into torch, Ray or the standard library are not counted; only our own seams are. Nor are the garbage
collector's `gc.callbacks` (the DAG worker's collection timer): the interpreter runs them inside whatever code
allocates, so the file they interrupt did not call them. Usage (from the root of a
checkout whose packages are installed):

    python tools/seam_walk.py [--workdir DIR] [--steps N]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("rl_core", "rl_engines", "rl_coordinator", "rl_runtime", "rl_recipes")
STEP = ("rl_runtime.workers._executor", "GraphExecutor", "run_step")
"""(module, class, method) of a DAG worker's training step: every node of the worker's task graph, in order."""

_SITECUSTOMIZE = r"""
import gc, importlib.abc, importlib.util, json, os, sys
_OUT = os.environ.get("SEAM_WALK_OUT")
if _OUT:
    _PACKAGES = %(packages)r
    _TARGET = %(target)r
    _edges = set()
    _gc_codes = set()  # code of the gc.callbacks: the interpreter runs them inside any allocation, not a call

    def _relative(path):
        for name in _PACKAGES:
            marker = os.sep + name + os.sep
            if marker in path:
                return path[path.index(marker) + 1:]
        return None

    def _hook(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        if frame.f_code in _gc_codes:
            return
        callee = _relative(frame.f_code.co_filename)
        if callee is None:
            return
        # The nearest caller of ours: a call through code defined elsewhere (`@torch.no_grad()`, a dataclass's
        # generated __init__ running __post_init__, autograd running a Function's backward) still crosses from
        # the file that made it. "direct" keeps only calls whose immediate caller is ours (the count before
        # 2026-11-27, which missed those).
        back = frame.f_back
        direct = True
        while back is not None:
            caller = _relative(back.f_code.co_filename)
            if caller is not None:
                _edges.add((caller, callee, direct))
                return
            back = back.f_back
            direct = False

    def _traced(run_step):
        def run_step_traced(self, *args, **kwargs):
            _gc_codes.update(getattr(getattr(cb, "__func__", cb), "__code__", None) for cb in gc.callbacks)
            sys.setprofile(_hook)
            try:
                return run_step(self, *args, **kwargs)
            finally:
                sys.setprofile(None)
                with open(os.path.join(_OUT, "%%d.json" %% os.getpid()), "w") as handle:
                    json.dump(sorted(_edges), handle)
        return run_step_traced

    class _Patcher(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != _TARGET[0]:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                owner = getattr(module, _TARGET[1])
                setattr(owner, _TARGET[2], _traced(getattr(owner, _TARGET[2])))

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Patcher())
"""


def _run(command: list[str], env: dict[str, str], cwd: Path) -> None:
    print("$", " ".join(command), flush=True)
    subprocess.run(command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def _package_of(path: str) -> str:
    return path.split(os.sep, 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="where the recipe runs (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=2, help="training steps to trace")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="seam_walk_"))
    workdir.mkdir(parents=True, exist_ok=True)
    hook_dir, out_dir = workdir / "hook", workdir / "edges"
    hook_dir.mkdir(exist_ok=True)
    out_dir.mkdir(exist_ok=True)
    for old in out_dir.glob("*.json"):
        old.unlink()
    (hook_dir / "sitecustomize.py").write_text(_SITECUSTOMIZE % {"packages": PACKAGES, "target": STEP})

    env = dict(os.environ)
    cli = [sys.executable, "-c", "from rl_recipes.cli import main; main()"]
    if not (workdir / "runs/embedded/sft/model").exists():
        # The walk needs a model and the data files, not a good model: a short warm start.
        _run([*cli, "sft", "steps=20"], env, workdir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")]))
    env["SEAM_WALK_OUT"] = str(out_dir)
    overrides = [
        f"trainer.total_steps={args.steps}",
        "trainer.validate_before_train=false",
        "trainer.validate_every=0",
        "trainer.steps_per_call=1",
        "trainer.resume=never",
        "trainer.log_sinks=[jsonl]",
        "warm_start=null",
    ]
    _run([*cli, "train", "grpo", *overrides], env, workdir)

    traced: set[tuple[str, str, bool]] = set()
    for dump in out_dir.glob("*.json"):
        traced.update((caller, callee, direct) for caller, callee, direct in json.loads(dump.read_text()))
    _report({(caller, callee) for caller, callee, _ in traced}, "SEAM_WALK")
    direct_edges = {(caller, callee) for caller, callee, direct in traced if direct}
    direct_crossings = {(a, b) for a, b in direct_edges if _package_of(a) != _package_of(b)}
    direct_files = {path for edge in direct_edges for path in edge}
    print("crossings made only through code outside our packages (wrappers, generated __init__, autograd):")
    for caller, callee in sorted({(a, b) for a, b, _ in traced if _package_of(a) != _package_of(b)} - direct_crossings):
        print(f"  {caller} -> {callee}")
    print(
        "direct callers only (how the walk was counted before 2026-11-27): "
        f"SEAM_WALK_DIRECT files={len(direct_files)} crossings={len(direct_crossings)}"
    )


def _report(edges: set[tuple[str, str]], tag: str) -> None:
    files = {path for edge in edges for path in edge}
    crossings = sorted((a, b) for a, b in edges if _package_of(a) != _package_of(b))
    pairs = collections.Counter((_package_of(a), _package_of(b)) for a, b in crossings)
    print(f"files: {len(files)}")
    for path in sorted(files):
        print(f"  {path}")
    print(f"package crossings: {len(crossings)}")
    for caller, callee in crossings:
        print(f"  {caller} -> {callee}")
    print("by package pair:")
    for (a, b), count in sorted(pairs.items()):
        print(f"  {a} -> {b}: {count}")
    print(f"{tag} files={len(files)} crossings={len(crossings)} pairs={len(pairs)}")


if __name__ == "__main__":
    main()
