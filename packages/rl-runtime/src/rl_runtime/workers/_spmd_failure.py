"""A torchrun rank's failure told to every rank, so each stops naming the rank, the node and the exception.

When one rank raises (a node, a checkpoint, building its worker), the others are usually waiting in a collective
with it (an FSDP all-gather, the step's metric gather). They cannot be told in band, so the failed rank writes one
record to the job's TCP store (the one torchrun's `env://` rendezvous set up) before it raises, and its process
ends; gloo then fails the others' pending collective at once ("Connection closed by peer"), and each of them finds
the record and raises `RankFailedError` naming the failed rank instead of that connection error.

The first failure wins (`compare_set`): a rank whose error comes after another rank's record is a consequence and
names the first. Nothing of this runs on the happy path: the store is touched only inside an `except`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from typing import Any

import attrs
import torch.distributed as dist

from rl_runtime.workers._errors import NodeExecutionError, RankFailedError

logger = logging.getLogger(__name__)

FAILURE_KEY = "rl_runtime/spmd/first_failure"
"""The store key of the job's first failure (a JSON `RankFailure`)."""


@attrs.frozen
class RankFailure:
    """What one rank reports of its failure."""

    rank: int
    world_size: int
    host: str
    pid: int
    where: str
    """`node 'reward' at step 3`, or the action that failed (`save_checkpoint`, `start`)."""
    error: str
    """The exception's last line: `ValueError: boom`."""

    def describe(self) -> str:
        """`rank 1 of 2 (host h, pid p) failed in node 'reward' at step 3: ValueError: boom`."""
        return (
            f"rank {self.rank} of {self.world_size} (host {self.host}, pid {self.pid}) failed in {self.where}: "
            f"{self.error}"
        )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def failure_of(error: BaseException, action: str, rank: int, world_size: int) -> RankFailure:
    """The RankFailure of `error`, raised on this process (`rank` of `world_size`) while it ran `action`."""
    if isinstance(error, NodeExecutionError):
        where, message = f"node {error.node_id!r} at step {error.step}", _last_line(error.traceback_text)
    else:
        where, message = action, f"{type(error).__name__}: {_last_line(str(error))}"
    return RankFailure(rank, world_size, socket.gethostname(), os.getpid(), where, message)


def _job_store() -> Any:
    # The store the default process group was built on: torchrun's agent store (or rank 0's under a plain env://).
    return dist.distributed_c10d._get_default_store()


def share_failure(error: BaseException, action: str, store: Any = None) -> RankFailedError | None:
    """Record `error` (raised here while running `action`) as the job's failure unless a rank recorded one first.

    Returns None when this rank's error is the first (re-raise it: its message names this rank), else the
    RankFailedError naming the rank that failed first (raise it from `error`). A store that cannot be reached
    (the rank hosting it is gone) also returns None, after a warning: the local error is all there is to say."""
    if isinstance(error, RankFailedError):  # already the first failure's report
        return None
    rank, world_size = dist.get_rank(), dist.get_world_size()
    mine = failure_of(error, action, rank, world_size)
    payload = json.dumps(attrs.asdict(mine))
    try:
        stored = (store or _job_store()).compare_set(FAILURE_KEY, "", payload)
    except Exception as unreachable:  # the store's host ended: no record to read or write
        logger.warning("rank %d could not reach the job's store to share its failure: %s", rank, unreachable)
        return None
    text = stored.decode() if isinstance(stored, bytes) else str(stored)
    if text == payload:
        logger.error("%s; the other ranks stop with it", mine.describe())
        return None
    first = RankFailure(**json.loads(text))
    if first.rank == rank:  # this rank's earlier failure (a step that failed, then a close that failed too)
        return None
    logger.error("%s; rank %d stops with it (here: %s)", first.describe(), rank, mine.error)
    return RankFailedError(first.describe(), first.rank, rank)
