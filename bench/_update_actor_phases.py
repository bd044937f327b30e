"""Where the actor update's time goes, measured inside our DAG workers (`grpo_vs_trl.py --phases-dir DIR`).

`install` is a Ray `worker_process_setup_hook`: in each worker it wraps the functions that make up the
`update_actor` stage (the body of `rl_runtime.nodes._train.train_actor`'s `timed("update_actor")`) with wall-clock
timers, and appends one JSON line per update to `DIR/phases-<pid>.jsonl`: the seconds of each phase, the
update's total and the micro-batch count. With `UPDATE_ACTOR_CPROFILE=1` it also runs cProfile over every update
and rewrites `DIR/update_actor-<pid>.pstats` every `DUMP_EVERY` updates. `summarise` prints the median per phase.

Phases (nested phases are reported separately and subtracted from their parent's `self` time):
  update_actor       `ActorRole.update_on_policy` + policy_forward_metrics (the on-policy stage's body)
  plan               the engine's micro-batch planning (`FSDPEngine._plan`)
  normaliser         `FSDPEngine.global_normalizer` (an all-gather of three counts per rank; not called under
                     ddp, where the counts ride on the gradient all-reduce)
  select_rows        copying a micro-batch's rows out of the batch
  forward            `forward_micro_batch` (layout + the network's forward, log-probs and entropy)
  loss               the actor's objective (`PolicyObjective.__call__`) on the forward's outputs
  backward           `backward_micro_batches` less its forward, loss and select_rows: `loss.backward()` (and
                     the on-policy update's copy of the forward's log-probs and entropy into the batch)
  grad_all_reduce    `all_reduce_gradients` (the replicas' gradient sum, waiting for the slower rank included)
  grad_norm_clip     the global gradient norm and clipping
  optimizer          `apply_gradients` less the norm: AdamW's step and zero_grad
  lr_schedule        `step_lr_scheduler`
  forward_metrics    `policy_forward_metrics` (entropy and log-prob metrics of the training forward)
  other              update_actor less every phase above: Python between the phases
"""

from __future__ import annotations

import cProfile
import functools
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

DIR_ENV = "UPDATE_ACTOR_PHASES_DIR"
CPROFILE_ENV = "UPDATE_ACTOR_CPROFILE"
DUMP_EVERY = 20
_NESTED = {"backward": ("forward", "loss", "select_rows"), "optimizer": ("grad_norm_clip",)}
_TOTAL = "update_actor"
_PHASES = (
    "plan",
    "normaliser",
    "select_rows",
    "forward",
    "loss",
    "backward",
    "grad_all_reduce",
    "grad_norm_clip",
    "optimizer",
    "lr_schedule",
    "forward_metrics",
)


class _Recorder:
    def __init__(self, folder: Path, cprofile: bool) -> None:
        self.path = folder / f"phases-{os.getpid()}.jsonl"
        self.pstats = folder / f"update_actor-{os.getpid()}.pstats"
        self.profiler = cProfile.Profile() if cprofile else None
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.updates = 0
        self.start = 0.0

    def begin(self) -> None:
        self.seconds.clear()
        self.calls.clear()
        self.start = time.perf_counter()
        if self.profiler is not None:
            self.profiler.enable()

    def end(self) -> None:
        total = time.perf_counter() - self.start
        if self.profiler is not None:
            self.profiler.disable()
        self.updates += 1
        seconds = dict(self.seconds)
        for parent, children in _NESTED.items():
            seconds[parent] = seconds.get(parent, 0.0) - sum(seconds.get(child, 0.0) for child in children)
        seconds["other"] = total - sum(seconds.get(phase, 0.0) for phase in _PHASES)
        record = {_TOTAL: total, "micro_batches": self.calls["forward"], **seconds}
        with self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")
        if self.profiler is not None and self.updates % DUMP_EVERY == 0:
            self.profiler.dump_stats(str(self.pstats))


def _timed(recorder: _Recorder, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            recorder.seconds[phase] += time.perf_counter() - start
            recorder.calls[phase] += 1

    return wrapper


def install() -> None:
    """Wrap the update's phases in this process (a Ray worker_process_setup_hook); no-op without `DIR_ENV`."""
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return
    from rl_core.objectives import _policy
    from rl_engines.training import _engine, _replicate, _step  # noqa: F401
    from rl_runtime.nodes import _train
    from rl_runtime.roles import _actor

    recorder = _Recorder(Path(folder), os.environ.get(CPROFILE_ENV) == "1")
    update = _actor.ActorRole.update_on_policy

    @functools.wraps(update)
    def first(*args: Any, **kwargs: Any) -> Any:
        recorder.begin()
        return update(*args, **kwargs)

    metrics = _train.policy_forward_metrics

    @functools.wraps(metrics)
    def last(*args: Any, **kwargs: Any) -> Any:
        try:
            return _timed(recorder, "forward_metrics", metrics)(*args, **kwargs)
        finally:
            recorder.end()

    _actor.ActorRole.update_on_policy = first
    _train.policy_forward_metrics = last
    _engine.FSDPEngine._plan = _timed(recorder, "plan", _engine.FSDPEngine._plan)
    _engine.FSDPEngine.global_normalizer = _timed(recorder, "normaliser", _engine.FSDPEngine.global_normalizer)
    _engine.FSDPEngine.step_lr_scheduler = _timed(recorder, "lr_schedule", _engine.FSDPEngine.step_lr_scheduler)
    _step.select_rows = _timed(recorder, "select_rows", _step.select_rows)
    _step.forward_micro_batch = _timed(recorder, "forward", _step.forward_micro_batch)
    _step.backward_micro_batches = _timed(recorder, "backward", _step.backward_micro_batches)
    _step.all_reduce_gradients = _timed(recorder, "grad_all_reduce", _step.all_reduce_gradients)
    _step._grad_norm = _timed(recorder, "grad_norm_clip", _step._grad_norm)
    _step.apply_gradients = _timed(recorder, "optimizer", _step.apply_gradients)
    # The engine calls the role's objective itself: time the class's __call__ (special methods are looked up there).
    _policy.PolicyObjective.__call__ = _timed(recorder, "loss", _policy.PolicyObjective.__call__)


def summarise(folder: Path, skip: int = 0) -> str:
    """Median milliseconds per phase over each worker's updates after its first `skip`, one column per worker."""
    columns = {}
    for path in sorted(folder.glob("phases-*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines()[skip:]]
        if records:
            columns[path.stem.removeprefix("phases-")] = records
    lines = [f"{'phase':<16}" + "".join(f"{'pid ' + pid:>12}" for pid in columns)]
    for phase in (_TOTAL, *_PHASES, "other", "micro_batches"):
        scale = 1.0 if phase == "micro_batches" else 1e3
        cells = [statistics.median(r.get(phase, 0.0) for r in records) * scale for records in columns.values()]
        lines.append(f"{phase:<16}" + "".join(f"{cell:12.2f}" for cell in cells))
    counts = ", ".join(str(len(records)) for records in columns.values())
    return f"median ms per update ({counts} updates per worker after the first {skip})\n" + "\n".join(lines)


if __name__ == "__main__":
    print(summarise(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0))
