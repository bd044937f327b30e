"""The trainer side of SGLang's distributed weight update, written the way its clients write it.

sglang 0.5 (`sglang.srt.utils.init_custom_process_group`), AReaL 1.0 (`areal.utils.distributed`) and verl each
carry the same helper: torch's `tcp://` rendezvous (rank 0 hosts the store and waits for every rank to check
in), a `PrefixStore` named after the group, torch's private process-group helper (which prefixes the group name
and the device once more), and group rank i registered as rank i so that `dist.broadcast(src=0, group=...)`
addresses the trainer. The call sequence is AReaL's `RemoteSGLangEngine`: post `/init_weights_update_group`
(the port as a string), join the group while that request waits, then per bucket post
`/update_weights_from_distributed` and broadcast every tensor asynchronously, waiting on the handles.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist


def init_custom_process_group(
    *, backend: str, init_method: str, world_size: int, rank: int, group_name: str, timeout: datetime.timedelta
) -> dist.ProcessGroup:
    """A process group outside the default world, as sglang's / AReaL's trainer side creates it."""
    from torch.distributed.distributed_c10d import (  # the clients use these private helpers too
        Backend,
        GroupName,
        PrefixStore,
        _new_process_group_helper,
        _world,
    )
    from torch.distributed.rendezvous import rendezvous

    store, rank, world_size = next(rendezvous(init_method, rank, world_size, timeout=timeout))
    store.set_timeout(timeout)
    group, _ = _new_process_group_helper(
        world_size,
        rank,
        [],
        Backend(backend),
        PrefixStore(group_name, store),
        group_name=GroupName(group_name),
        backend_options=None,
        timeout=timeout,
    )
    assert isinstance(group, dist.ProcessGroup), f"rank {rank} is not a member of its own group"
    _world.pg_group_ranks[group] = {i: i for i in range(world_size)}
    return group


class InBackground:
    """One HTTP call on its own thread (the clients issue it and join the group meanwhile); `result()` joins."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._result: list[Any] = []
        self._thread = threading.Thread(target=lambda: self._result.append(call()), daemon=True)
        self._thread.start()

    def result(self, timeout_s: float = 120.0) -> Any:
        """The call's return value; fails if it has not returned within `timeout_s`."""
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"the call did not return within {timeout_s} s"
        return self._result[0]


def init_request(port: int, group_name: str, world_size: int = 2) -> dict[str, Any]:
    """AReaL's `/init_weights_update_group` body: the port as a string, engine ranks from 1, gloo on CPU."""
    return {
        "master_address": "127.0.0.1",
        "master_port": str(port),
        "rank_offset": 1,
        "world_size": world_size,
        "backend": "gloo",
        "group_name": group_name,
    }


def update_request(named: list[tuple[str, torch.Tensor]], group_name: str) -> dict[str, Any]:
    """AReaL's `/update_weights_from_distributed` body: dtypes without the `torch.` prefix, shapes as lists."""
    return {
        "names": [name for name, _ in named],
        "dtypes": [str(tensor.dtype).split("torch.")[1] for _, tensor in named],
        "shapes": [list(tensor.shape) for _, tensor in named],
        "group_name": group_name,
        "flush_cache": True,
    }


def broadcast_all(group: dist.ProcessGroup, named: list[tuple[str, torch.Tensor]]) -> None:
    """Broadcast every tensor from rank 0 as AReaL does: all handles first, then wait on each."""
    handles = [dist.broadcast(tensor.contiguous(), src=0, group=group, async_op=True) for _, tensor in named]
    for handle in handles:
        assert handle is not None
        handle.wait()
