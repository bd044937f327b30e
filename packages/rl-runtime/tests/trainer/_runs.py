"""Helpers of the end-to-end trainer tests: comparable metrics, actor weights from a checkpoint, a run that signals
itself (a kill, a Ctrl-C) at a chosen step."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from rl_runtime.testing import run_signalled
from rl_runtime.trainer._checkpoints import checkpoint_root, complete_checkpoints

KILL_WAIT_S = 300.0
STRAIGHT: dict[str, Any] = {"total_steps": 4, "checkpoint_every": 1, "keep_last": 3, "validate_every": 4}
"""The uninterrupted 4-step run the resume tests compare against (conftest's `straight`, shared by the session): a
checkpoint after every step (a killed run resumes from one), the last 3 kept (step 2's is the ddp run's reference,
steps 3 and 4 the damaged-checkpoint tests'; pruning step 1's is test_e2e's keep-last check), a validation after the
last (the steps-per-call run validates there too); no validation before step 4, so its first steps train as a plain
run's."""
NON_DETERMINISTIC = ("timing_s/", "timing_per_token_ms/", "perf/throughput", "perf/time_per_step")
_MODEL_PREFIX = "backbone."
"""The actor checkpoint holds the policy network, whose Hugging Face model sits under this attribute."""


def deterministic(metrics: dict[str, float]) -> dict[str, float]:
    """`metrics` without the wall-clock ones."""
    return {name: value for name, value in metrics.items() if not name.startswith(NON_DETERMINISTIC)}


def actor_weights(checkpoint: Path, scratch: Path) -> dict[str, torch.Tensor]:
    """The actor's weights in checkpoint folder `checkpoint`, under their Hugging Face names."""
    target = scratch / f"{checkpoint.parent.parent.parent.name}_{checkpoint.name}.pt"
    dcp_to_torch_save(checkpoint / "actor", target)
    state = torch.load(target, weights_only=False)
    return {
        name.removeprefix(_MODEL_PREFIX): value
        for name, value in state["model"].items()
        if isinstance(value, torch.Tensor)
    }


def run_and_signal(
    folder: Path,
    at_step: int,
    placement: Mapping[str, Any] | None = None,
    trainer: Mapping[str, Any] | None = None,
    sig: signal.Signals = signal.SIGKILL,
    algorithm: Mapping[str, Any] | None = None,
) -> tuple[int, str]:
    """Run a 4-step run in its own process group, which sends the group `sig` (SIGKILL) itself as it logs step
    `at_step` (rl-runtime's `signal_at_step` test sink, after `jsonl`): a SIGKILL leaves the checkpoint before
    `at_step` the newest, a SIGINT lets it finish step `at_step` and save it; where it stops never depends on the
    machine's speed. `trainer` adds to the config's trainer section, `algorithm` to its algorithm section. Returns
    the run's exit status (negative: killed by that signal; never 0, the run did not finish) and its stderr.

    When this process holds a Ray runtime (the `ray_runtime` fixture), the run's driver joins it rather than starting
    one of its own (a start costs 3-15 s on a 2-core machine). What a test reads is the same: the driver stops at
    that step (on SIGINT after saving its checkpoint; Ray's daemons block SIGINT either way), its DAG workers end with
    it (Ray ends a dead driver's actors, rl_runtime's driver watch too), and the resumed run reads the folder it left;
    only a SIGKILL no longer takes a runtime's daemons down with the driver."""
    address = ray.get_runtime_context().gcs_address if ray.is_initialized() else None
    script = textwrap.dedent(
        f"""
        import signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from _task import TokenTask, tiny_config
        from pathlib import Path
        from rl_runtime.testing import SIGNAL_AT_STEP, register_signal_at_step
        from rl_runtime.trainer import Trainer
        address = {address!r}
        if address is not None:
            import ray
            ray.init(address=address, log_to_driver=False)
        register_signal_at_step({at_step}, signal.{sig.name})
        placement = {dict(placement or {})!r}
        trainer = {{"total_steps": 4, "checkpoint_every": 1, **{dict(trainer or {})!r}}}
        trainer["log_sinks"] = ["jsonl", SIGNAL_AT_STEP]
        algorithm = {dict(algorithm or {})!r}
        config = tiny_config(Path({str(folder)!r}), placement=placement, algorithm=algorithm, **trainer)
        Trainer(config, TokenTask).fit()
        """
    )
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    stderr = folder.parent / f"{folder.name}.stderr.{len(list(folder.parent.glob(folder.name + '.stderr.*')))}"
    return run_signalled([sys.executable, "-c", script], at_step=at_step, stderr=stderr, timeout_s=KILL_WAIT_S, env=env)


def newest_checkpoint_step(folder: Path) -> int:
    """The step of the newest complete checkpoint of the run `run_and_signal(folder, ...)` wrote; 0 without one."""
    found = complete_checkpoints(checkpoint_root(folder / "run"))
    return found[-1][0] if found else 0
