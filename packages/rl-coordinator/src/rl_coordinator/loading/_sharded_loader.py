"""Per-rank shards of a seeded epoch permutation, with exact resume across epoch boundaries."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator.loading._sources import Row, RowSource, check_columns, check_row, open_source

logger = logging.getLogger(__name__)

# Bump when the meaning of the state dict changes, so an old checkpoint is rejected rather than misread.
_STATE_FORMAT = 1
# The settings a saved position only makes sense under; a state dict saved under other values is rejected.
_STATE_SETTINGS = ("seed", "dp_size", "dataset_len", "batch_size", "shuffle", "drop_last")
# torch.Generator.manual_seed takes 64-bit values; 63 bits keeps the seed non-negative.
_SEED_BITS = 63


def _epoch_seed(seed: int, epoch: int) -> int:
    # A hash rather than seed + epoch, so (seed, epoch + 1) and (seed + 1, epoch) give unrelated orders.
    digest = hashlib.blake2b(f"{seed}:{epoch}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> (64 - _SEED_BITS)


def epoch_permutation(num_rows: int, seed: int, epoch: int, *, shuffle: bool = True) -> torch.Tensor:
    """The global order of rows in epoch `epoch`: (num_rows,) int64, the same on every rank and process."""
    if not shuffle:
        return torch.arange(num_rows, dtype=torch.int64)
    generator = torch.Generator()
    generator.manual_seed(_epoch_seed(seed, epoch))
    return torch.randperm(num_rows, generator=generator)


@dataclass(frozen=True)
class LoaderBatch:
    """One rank's rows for one step.

    Attributes:
        rows: the rows (dicts), in shard order.
        indices: global dataset index of each row.
        epoch: epoch the batch belongs to (0-based).
        step: step within the epoch (0-based).
        locations: where each row comes from, for messages (the source's `where(index)`: file, row, line).
    """

    rows: list[Row]
    indices: list[int]
    epoch: int
    step: int
    locations: list[str]


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CoordinatorInputError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class ShardedLoader:
    """Infinite (or `num_epochs`-bounded) iterator of one data-parallel rank's batches.

    Each epoch has a global order from `epoch_permutation(len(source), seed, epoch)`. Step `s` of the
    epoch consumes the global positions `[s*G, (s+1)*G)` with `G = dp_size * batch_size`, and rank `r`
    takes the strided positions `r, r + dp_size, r + 2*dp_size, ...` of that window, so a rank reads
    only its own rows and the ranks of a step together read one contiguous window of the order.

    With `drop_last=True` the `len(source) % G` rows at the end of each epoch's order are skipped
    (they are different rows each epoch when shuffling). With `drop_last=False` the last step of an
    epoch is partial: each rank gets its strided share of the remainder, possibly fewer than
    `batch_size` rows and possibly none, so that every rank still takes the same number of steps.

    Args:
        source: a RowSource, a .jsonl/.ndjson or .parquet path, or a dataset with len() and [int].
        dp_rank: this rank, in [0, dp_size).
        dp_size: number of data-parallel ranks.
        batch_size: rows per rank per step.
        seed: seed of the epoch permutations; must be the same on every rank.
        shuffle: permute each epoch (False: dataset order).
        drop_last: skip the rows that do not fill a whole step (see above).
        required_fields: fields every row must have (not None); a row without one raises
            CoordinatorInputError naming the file, the row index and the field.
        num_epochs: stop after this many epochs; None loops forever.
    """

    def __init__(
        self,
        source: RowSource | str | os.PathLike[str] | Any,
        *,
        dp_rank: int,
        dp_size: int,
        batch_size: int,
        seed: int,
        shuffle: bool = True,
        drop_last: bool = True,
        required_fields: Sequence[str] = (),
        num_epochs: int | None = None,
    ) -> None:
        _check_int("dp_size", dp_size, 1)
        if isinstance(dp_rank, bool) or not isinstance(dp_rank, int) or not 0 <= dp_rank < dp_size:
            raise CoordinatorInputError(f"dp_rank must be an int in [0, dp_size) = [0, {dp_size}), got {dp_rank!r}")
        _check_int("batch_size", batch_size, 1)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise CoordinatorInputError(f"seed must be an int (the same on every rank), got {seed!r}")
        if num_epochs is not None:
            _check_int("num_epochs", num_epochs, 1)
        if isinstance(required_fields, str) or not all(isinstance(name, str) for name in required_fields):
            raise CoordinatorInputError(
                f"required_fields must be a sequence of field names such as ('prompt', 'answer'), "
                f"got {required_fields!r}"
            )
        self.source = open_source(source)
        self.required_fields = tuple(required_fields)
        check_columns(self.source, self.required_fields)
        self.dp_rank, self.dp_size, self.batch_size, self.seed = dp_rank, dp_size, batch_size, seed
        self.shuffle, self.drop_last, self.num_epochs = bool(shuffle), bool(drop_last), num_epochs
        self.num_rows = len(self.source)
        self.steps_per_epoch = self._count_steps()
        self._epoch = 0
        self._step = 0
        self._shard_epoch = -1
        self._shard = torch.empty(0, dtype=torch.int64)

    def _count_steps(self) -> int:
        global_batch = self.dp_size * self.batch_size
        if self.num_rows == 0:
            raise CoordinatorInputError(f"{self.source.name} has no rows; a loader needs at least one")
        if not self.drop_last:
            return -(-self.num_rows // global_batch)
        if self.num_rows < global_batch:
            fix = (
                f"lower batch_size to at most {self.num_rows // self.dp_size} or set drop_last=False"
                if self.num_rows >= self.dp_size
                else "use fewer data-parallel ranks or set drop_last=False"
            )
            raise CoordinatorInputError(
                f"{self.source.name} has {self.num_rows} rows, fewer than dp_size * batch_size = "
                f"{self.dp_size} * {self.batch_size} = {global_batch}, so drop_last=True leaves no full step; {fix}"
            )
        return self.num_rows // global_batch

    @property
    def epoch(self) -> int:
        """Epoch of the next batch (0-based)."""
        return self._epoch

    @property
    def step(self) -> int:
        """Step within the epoch of the next batch (0-based)."""
        return self._step

    def _rank_shard(self, epoch: int) -> torch.Tensor:
        if epoch != self._shard_epoch:
            order = epoch_permutation(self.num_rows, self.seed, epoch, shuffle=self.shuffle)
            self._shard = order[self.dp_rank :: self.dp_size].clone()
            self._shard_epoch = epoch
            logger.debug("rank %d/%d starts epoch %d of %s", self.dp_rank, self.dp_size, epoch, self.source.name)
        return self._shard

    def __iter__(self) -> Iterator[LoaderBatch]:
        return self

    def __next__(self) -> LoaderBatch:
        if self.num_epochs is not None and self._epoch >= self.num_epochs:
            raise StopIteration
        shard = self._rank_shard(self._epoch)
        start = self._step * self.batch_size
        indices = shard[start : start + self.batch_size].tolist()
        raw_rows = self.source.rows(indices)
        locations = [self.source.where(index) for index in indices]
        rows = [check_row(row, self.required_fields, where) for where, row in zip(locations, raw_rows, strict=True)]
        batch = LoaderBatch(rows=rows, indices=indices, epoch=self._epoch, step=self._step, locations=locations)
        self._advance()
        return batch

    def _advance(self) -> None:
        # Rolling over here (not on the next call) makes a state saved after an epoch's last batch
        # point at the next epoch's first batch.
        self._step += 1
        if self._step >= self.steps_per_epoch:
            self._epoch += 1
            self._step = 0

    def state_dict(self) -> dict[str, Any]:
        """Position of the next batch plus the settings it is only valid under (plain ints and bools)."""
        return {
            "format": _STATE_FORMAT,
            "epoch": self._epoch,
            "step": self._step,
            "seed": self.seed,
            "dp_size": self.dp_size,
            "dataset_len": self.num_rows,
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at the batch after the one `state` was saved after (any rank's state fits every rank)."""
        if not isinstance(state, Mapping):
            raise CoordinatorInputError(f"state must be a mapping from ShardedLoader.state_dict(), got {type(state)}")
        missing = [key for key in ("format", "epoch", "step", *_STATE_SETTINGS) if key not in state]
        if missing:
            raise CoordinatorInputError(f"loader state dict lacks {missing}; pass what ShardedLoader.state_dict() made")
        if state["format"] != _STATE_FORMAT:
            raise CoordinatorInputError(
                f"loader state dict has format {state['format']!r}, this version reads format {_STATE_FORMAT}"
            )
        mine = self.state_dict()
        mismatched = [key for key in _STATE_SETTINGS if state[key] != mine[key]]
        if mismatched:
            saved = ", ".join(f"{key}={state[key]!r}" for key in mismatched)
            here = ", ".join(f"{key}={mine[key]!r}" for key in mismatched)
            raise CoordinatorInputError(
                f"loader state dict was saved with {saved} but this loader has {here}; "
                "build the loader with the saved settings to resume"
            )
        epoch = _check_int("state['epoch']", state["epoch"], 0)
        step = _check_int("state['step']", state["step"], 0)
        if step > self.steps_per_epoch:
            raise CoordinatorInputError(
                f"state['step'] = {step} is past the {self.steps_per_epoch} steps of an epoch; the state is corrupt"
            )
        self._epoch, self._step = epoch, step
        if self._step == self.steps_per_epoch:
            self._epoch, self._step = epoch + 1, 0
