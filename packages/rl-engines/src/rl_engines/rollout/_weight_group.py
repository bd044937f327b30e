"""A process group that exists only to move weights from the trainer (rank 0) to engine ranks.

It is built from its own `TCPStore` (hosted by rank 0) rather than `torch.distributed.new_group`, so it
is independent of the training world: engines never join the trainer's default group, and the trainer
can open and close it between steps. gloo serves CPU tensors, NCCL CUDA tensors. Every collective waits
at most `spec.timeout_s` and then raises `EngineTimeoutError`; after a timeout the group is unusable and
must be closed and re-created.

The rendezvous is the one SGLang's `init_custom_process_group` performs (the function sglang 0.5's servers,
AReaL's and verl's trainers call with `init_method="tcp://host:port"`), so either side may be theirs:
every rank checks in with the store (the `tcp://` rendezvous waits for `world_size` check-ins), the backend's
keys live under `<group_name>/<group_name>//<device>/` (torch's process-group helper prefixes the group name and
the device once more), and gloo's rank 0 publishes the group's sequence number, which the other ranks wait for.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from rl_engines.rollout._errors import EngineStateError, EngineTimeoutError
from rl_engines.rollout._weight_types import WeightGroupSpec

if TYPE_CHECKING:
    from torch.distributed import ProcessGroupNCCL

# torch's stubs lag its runtime here: they omit ProcessGroupGloo._Options (the options its constructor takes),
# Backend.broadcast, and the re-export of the stores from torch.distributed; those lines say so.

logger = logging.getLogger(__name__)

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
_BACKEND_DEVICE = {"gloo": "cpu", "nccl": "cuda"}
"""The device torch's process-group helper files a backend's store keys under (gloo serves "cpu" first)."""


def _backend_store(
    spec: WeightGroupSpec,
    store: dist.Store,  # pyright: ignore[reportPrivateImportUsage]
) -> dist.Store:  # pyright: ignore[reportPrivateImportUsage]
    """The store view `init_custom_process_group` hands its backend: the group name, then torch's own
    `<group_name>/` and `<device>/` prefixes."""
    named = dist.PrefixStore(spec.group_name, store)  # pyright: ignore[reportPrivateImportUsage]
    helper = dist.PrefixStore(f"{spec.group_name}/", named)  # pyright: ignore[reportPrivateImportUsage]
    return dist.PrefixStore(f"{_BACKEND_DEVICE[spec.backend]}/", helper)  # pyright: ignore[reportPrivateImportUsage]


def _gloo_options(spec: WeightGroupSpec, timeout: datetime.timedelta) -> dist.ProcessGroupGloo._Options:  # pyright: ignore[reportAttributeAccessIssue]
    options = dist.ProcessGroupGloo._Options()  # pyright: ignore[reportAttributeAccessIssue]
    options._timeout = timeout
    # On loopback, bind gloo to 127.0.0.1 explicitly: the default device resolves the host name, which
    # may map to an interface the other rank cannot reach in a sandbox.
    if spec.master_address in _LOOPBACK_HOSTS:
        options._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
    else:
        options._devices = [dist.ProcessGroupGloo.create_default_device()]
    return options


def _nccl_group(
    store: dist.Store,  # pyright: ignore[reportPrivateImportUsage]
    rank: int,
    size: int,
    timeout: datetime.timedelta,
) -> ProcessGroupNCCL:
    from torch.distributed import ProcessGroupNCCL  # CUDA builds only

    options = ProcessGroupNCCL.Options()
    options._timeout = timeout
    options.is_high_priority_stream = False
    return ProcessGroupNCCL(store, rank, size, options)


class WeightGroup:
    """One rank's membership of a weight-update group described by `spec`.

    Rank 0 is the trainer and hosts the store at `spec.master_address:spec.master_port`; engine ranks are
    `spec.rank_offset ..`. Construction blocks until every rank has joined (at most `spec.timeout_s`).
    """

    def __init__(self, spec: WeightGroupSpec, rank: int) -> None:
        if not 0 <= rank < spec.world_size:
            raise EngineStateError(f"rank {rank} is outside the weight group of size {spec.world_size}")
        if spec.backend == "nccl" and not dist.is_nccl_available():  # before the store: its peers would wait on us
            raise EngineStateError("backend='nccl' needs a CUDA build of torch with NCCL; use backend='gloo' on CPU")
        self.spec = spec
        self.rank = rank
        self._timeout = datetime.timedelta(seconds=spec.timeout_s)
        try:
            self._store = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
                spec.master_address,
                spec.master_port,
                spec.world_size,
                is_master=rank == 0,
                timeout=self._timeout,
                wait_for_workers=True,  # check in, as the `tcp://` rendezvous does; rank 0 waits for every rank
                multi_tenant=True,
            )
            prefixed = _backend_store(spec, self._store)
            if spec.backend == "gloo":
                self._group = dist.ProcessGroupGloo(prefixed, rank, spec.world_size, _gloo_options(spec, self._timeout))
            else:
                self._group = _nccl_group(prefixed, rank, spec.world_size, self._timeout)
            # Rank 0 publishes the sequence number and the others read it, as torch's helper does for every group.
            self._group._set_sequence_number_for_group()  # pyright: ignore[reportAttributeAccessIssue]
        except (RuntimeError, dist.DistStoreError) as error:
            raise EngineTimeoutError(
                f"joining weight group {spec.group_name!r} at {spec.master_address}:{spec.master_port} as rank "
                f"{rank}/{spec.world_size} failed within {spec.timeout_s} s: {error}"
            ) from error
        self._closed = False
        logger.info("joined weight group %r as rank %d/%d (%s)", spec.group_name, rank, spec.world_size, spec.backend)

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> None:
        """Broadcast `tensor` in place from rank `src` to every rank; raises `EngineTimeoutError` on timeout."""
        if self._closed:
            raise EngineStateError(f"weight group {self.spec.group_name!r} is closed; create a new one")
        options = dist.BroadcastOptions()
        options.rootRank = src
        options.timeout = self._timeout
        try:
            self._group.broadcast([tensor], options).wait(self._timeout)  # pyright: ignore[reportAttributeAccessIssue]
        except RuntimeError as error:
            raise EngineTimeoutError(
                f"broadcast of a {tuple(tensor.shape)} {tensor.dtype} tensor on weight group "
                f"{self.spec.group_name!r} failed or took over {self.spec.timeout_s} s: {error}"
            ) from error
        if tensor.is_cuda:
            torch.cuda.current_stream(tensor.device).synchronize()

    def close(self) -> None:
        """Leave the group and release its sockets; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        shutdown = getattr(self._group, "shutdown", None)
        if shutdown is not None:
            try:
                shutdown()
            except RuntimeError as error:  # an already-broken group cannot shut down cleanly
                logger.warning("weight group %r did not shut down cleanly: %s", self.spec.group_name, error)
        del self._group
        del self._store
