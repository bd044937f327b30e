"""The driver side of steps when every process is one slot (SPMD, launched by torchrun): each rank runs its own
`LocalWorker` and the ranks exchange their metric dicts over a torch.distributed group instead of Ray.

Every method is a collective: every rank calls it, in the same order, and gets the same answer (the metrics of
every rank, merged as Ray's `Driver` merges them). Sample batches stay in each rank as they do in a colocated Ray
worker, except where a node rebalances them across ranks: `SPMDEdgeClient` serves those coordinator calls over
torch.distributed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch.distributed as dist

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator.coordinator import ReadRequest, split_across_ranks
from rl_runtime.workers._local_worker import LocalWorker
from rl_runtime.workers._spmd_failure import share_failure
from rl_runtime.workers._step_result import StepResult, step_result

logger = logging.getLogger(__name__)

T = TypeVar("T")


def stop_together(action: str, call: Callable[[], T]) -> T:
    """`call()`; when it raises, the ranks stop together: the first rank to fail re-raises its own error (after
    recording it in the job's store), every later one raises the RankFailedError naming the first
    (`share_failure`). Free on the happy path: the store is touched only on an exception."""
    try:
        return call()
    except Exception as error:
        first = share_failure(error, action)
        if first is None:
            raise
        raise first from error


class SPMDDriver:
    """Runs steps on this rank's `worker` and gathers every rank's metrics over `group` (a gloo group of all ranks).

    Ray's `Driver` has one process that calls every worker; here every rank is both driver and worker, so a step
    is the local `run_steps` then an `all_gather_object` of the metric dicts. A node that raises on one rank raises
    its NodeExecutionError on that rank, which ends; the others, whose collectives with it then fail, raise a
    RankFailedError naming its rank, host, node and exception (`stop_together`).
    """

    def __init__(self, worker: LocalWorker, group: Any = None) -> None:
        self.worker = worker
        self.group = group
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    def _gather(self, value: object) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, value, group=self.group)
        return gathered

    def run_step(self, step: int) -> StepResult:
        """Run `step` on this rank; every rank's metrics merged (the same on every rank)."""
        return self.run_steps([step])[0]

    def run_steps(self, steps: Sequence[int]) -> list[StepResult]:
        """Run `steps` in order on this rank, then gather the ranks' metrics of each step.

        `received_bytes` is the pickled size of every rank's metric dicts: what the leader received."""
        steps = list(steps)
        if not steps:
            raise ValueError("run_steps needs at least one step")
        values = stop_together("run_steps", lambda: self._gather(self.worker.run_steps(steps)))
        return [step_result(step, [rank_values[index] for rank_values in values]) for index, step in enumerate(steps)]

    def evaluate(self, step: int) -> list[dict[str, float]]:
        """Every rank's validation metrics after `step` steps, by rank."""
        return stop_together("evaluate", lambda: self._gather(self.worker.evaluate(step)))

    def save_checkpoint(self, path: str) -> None:
        """Write this rank's part of a checkpoint under `path`; returns once every rank has written its part."""
        stop_together("save_checkpoint", lambda: (self.worker.save_checkpoint(path), self._barrier()))

    def load_checkpoint(self, path: str) -> None:
        """Restore this rank's part of the checkpoint in `path`; returns once every rank has."""
        stop_together("load_checkpoint", lambda: (self.worker.load_checkpoint(path), self._barrier()))

    def barrier(self) -> None:
        """Wait until every rank gets here."""
        stop_together("barrier", self._barrier)

    def _barrier(self) -> None:
        dist.barrier(group=self.group)

    def close(self) -> None:
        """Close this rank's worker (its engines; the process group stays with whoever started it)."""
        self.worker.close()


class SPMDEdgeClient:
    """A rebalance node's coordinator calls (`put_batch`, then `get_batch` on every rank) over torch.distributed.

    Ray's DataCoordinator collects every rank's samples of the step and hands each rank its share of a balanced
    partition. Here `put_batch` keeps this rank's samples and `get_batch` gathers every rank's (`all_gather_object`
    over `group`, gloo), partitions them with the coordinator's own `split_across_ranks` (the same StepSpec, each
    rank's batch one payload) and returns this rank's share, identically computed on every rank.
    """

    def __init__(self, group: Any = None) -> None:
        self.group = group
        self._held: dict[str, tuple[list[SampleInfo], Any]] = {}

    def put_batch(self, edge_key: str, infos: list[SampleInfo], payload: Any) -> int:
        """Hold this rank's `infos` and `payload` (indexable by sample) for the next `get_batch` of `edge_key`."""
        self._held[edge_key] = (list(infos), payload)
        return len(infos)

    def get_batch(self, request: ReadRequest) -> tuple[list[SampleInfo], list[Any]]:
        """This rank's share of the step: (its SampleInfos, its samples), from every rank's `put_batch`."""
        infos, payload = self._held.pop(request.edge_key, ([], None))
        mine = (infos, [payload[i] for i in range(len(infos))])
        gathered: list[Any] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(gathered, mine, group=self.group)
        every_info: list[SampleInfo] = []
        every_sample: list[Any] = []
        payload_keys: list[int] = []
        for rank, (rank_infos, rank_samples) in enumerate(gathered):
            every_info += rank_infos
            every_sample += rank_samples
            payload_keys += [rank] * len(rank_infos)
        if len(every_info) != request.spec.batch_size:
            raise CoordinatorInputError(
                f"edge {request.edge_key!r}, step {request.step}: the ranks put {len(every_info)} samples "
                f"({', '.join(str(len(infos)) for infos, _ in gathered)} by rank), the step reads "
                f"{request.spec.batch_size}"
            )
        parts = split_across_ranks(every_info, request.spec, payload_keys)
        share = parts[request.dp_rank]
        return [every_info[i] for i in share], [every_sample[i] for i in share]
