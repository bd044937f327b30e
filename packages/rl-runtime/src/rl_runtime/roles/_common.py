"""What the roles share: argument checks, batch-key checks, the mini-batch split and the update loop."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from rl_engines.training import Batch, ForwardSpec, LossFn, StepResult, TrainEngine
from rl_runtime.roles._errors import RoleConfigError, RoleError


def check_ppo_epochs(owner: str, ppo_epochs: int) -> None:
    """Raise RoleConfigError unless `ppo_epochs` is an int >= 1 (the run config checks `batch.ppo_epochs` too; a
    role built directly is checked here)."""
    if isinstance(ppo_epochs, bool) or not isinstance(ppo_epochs, int) or ppo_epochs < 1:
        raise RoleConfigError(
            f"{owner}: ppo_epochs must be an int >= 1 (batch.ppo_epochs), got {ppo_epochs!r}; pass 1 or more"
        )


def check_temperature(owner: str, temperature: float) -> None:
    """Raise RoleConfigError unless `temperature` is a finite number > 0 (as `rollout.temperature` is checked)."""
    if not (math.isfinite(temperature) and temperature > 0):
        raise RoleConfigError(
            f"{owner}: temperature must be a finite number > 0 (rollout.temperature), got {temperature}; "
            "pass the sampler's temperature"
        )


def require_keys(batch: Batch, keys: Sequence[str], role: str) -> None:
    """Raise RoleError naming the keys of `keys` that `batch` lacks and the `role` that needs them."""
    missing = [key for key in keys if key not in batch]
    if missing:
        raise RoleError(f"the {role} needs batch keys {missing}; found {sorted(batch)}")


def mini_batch_rows(num_samples: int, num_mini_batches: int) -> list[list[int]]:
    """Contiguous row ranges of `num_mini_batches` equal mini-batches of a rank's `num_samples` samples."""
    if num_samples % num_mini_batches:
        raise RoleError(
            f"{num_samples} samples on this rank do not split into batch.mini_batches_per_step={num_mini_batches} "
            "equal mini-batches; the batch plan should have refused this, so a node changed the sample count"
        )
    size = num_samples // num_mini_batches
    return [list(range(start, start + size)) for start in range(0, num_samples, size)]


def split_mini_batches(batch: Batch, num_mini_batches: int) -> list[Batch]:
    """`batch` (every tensor `(B, ...)`) as `num_mini_batches` equal contiguous mini-batches, in row order (views)."""
    num_samples = next((tensor.shape[0] for tensor in batch.values()), 0)
    return [
        {name: tensor[rows[0] : rows[-1] + 1] for name, tensor in batch.items()}
        for rows in mini_batch_rows(num_samples, num_mini_batches)
    ]


def run_update(
    engine: TrainEngine, batch: Batch, num_mini_batches: int, epochs: int, loss: LossFn, spec: ForwardSpec
) -> list[StepResult]:
    """`epochs` passes over the `num_mini_batches` mini-batches of `batch`, one optimizer step each (the engine
    plans its micro-batches and normaliser), then one schedule step."""
    mini_batches = split_mini_batches(batch, num_mini_batches)
    results = [engine.train_step(mini, loss, spec) for _ in range(epochs) for mini in mini_batches]
    engine.step_lr_scheduler()
    return results


class EngineRole:
    """A role around its own engine: what the runtime may ask of the engine goes through the role's methods
    (checkpoints, the step count), never through the engine itself."""

    def __init__(self, engine: TrainEngine) -> None:
        self._engine = engine

    @property
    def rank(self) -> int:
        """This process's data-parallel rank in the role's engine."""
        return self._engine.rank

    @property
    def global_step(self) -> int:
        """Optimizer steps the role's engine applied so far (skipped steps do not count)."""
        return self._engine.global_step

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write the engine's resumable checkpoint atomically to `path` (a collective)."""
        return self._engine.save_checkpoint(path)

    def load_checkpoint(self, path: str | Path) -> int:
        """Restore a checkpoint written by `save_checkpoint` (a collective); return its step count."""
        return self._engine.load_checkpoint(path)
