"""`WeightSync`: pushes the train engine's bucketed export into rollout engines and proves what they hold.

One `sync(buckets, version)`:
    [wake_up the engines asleep] -> pause(mode) -> transport.begin
    -> per bucket: [cast] -> checksum -> transport.send -> transport.finish
    -> flush_cache -> set_weight_version(version) -> verify -> resume
Verification asks each engine for `weight_version()` and `weights_checksum(names sent)` and compares them
with the version sent and the checksum the trainer computed over the tensors as sent
(`rl_engines.rollout.weights_checksum`, exact over bit patterns). A mismatch raises `SyncError` and leaves
the engines paused: they must not serve weights that could not be verified. Any other failure resumes
the engines and re-raises: an engine whose weights changed refuses requests until a version is set, so
resuming never serves an unlabelled mix.

An engine asleep when the sync starts (a colocated rollout engine that released its memory while training ran) is
woken first: an asleep engine refuses weight updates, so waking it is part of updating it, and the caller need not
know the engine's state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

from rl_engines.rollout import InferenceEngine, PauseMode, parse_dtype
from rl_engines.rollout._checksum import checksum_records, digest_records
from rl_engines.sync._calls import EngineCaller
from rl_engines.sync._errors import SyncConfigError, SyncError
from rl_engines.sync._transport import Bucket, SyncContext, WeightTransport

logger = logging.getLogger(__name__)

_PAUSE_MODES = ("abort", "wait", "keep")
_SLEEP_CAPABILITY = "sleep"
"""Engines with it may be asleep when a sync starts (`sleep`/`wake_up`); the sync wakes them."""
_NO_VERSION = -1
"""The context version of `close`: no weights are sent then (policy versions are ints >= 0)."""
DEFAULT_SYNC_TIMEOUT_S = 600.0
"""Bound on every single engine call of a sync (a pause drain, one bucket, a checksum)."""


@dataclass(frozen=True)
class WeightSyncConfig:
    """How `WeightSync` runs the protocol; the transport is chosen separately."""

    pause_mode: PauseMode = "abort"
    """What happens to in-flight requests: "abort" them, "wait" for them, or "keep" them parked."""
    timeout_s: float = DEFAULT_SYNC_TIMEOUT_S
    verify: bool = True
    """Compare each engine's version and weights checksum with the trainer's after the update."""
    dtype: str | None = None
    """Cast tensors to this dtype before sending (the engine's dtype, e.g. "bfloat16"); None sends as is."""
    inline_calls: bool = False
    """Run the engine calls the sync awaits one by one (pause, flush, version, verify, resume, the reference
    transport's sends) on the trainer's thread rather than on workers with a deadline: for engines in the trainer's
    process that bound their own waits (the "bounded_calls" capability, e.g. `HFEngine`). An overrun is then reported
    when the call returns."""

    def __post_init__(self) -> None:
        if self.pause_mode not in _PAUSE_MODES:
            raise SyncConfigError(f"WeightSyncConfig.pause_mode must be one of {_PAUSE_MODES}, got {self.pause_mode!r}")
        if not self.timeout_s > 0:
            raise SyncConfigError(f"WeightSyncConfig.timeout_s must be > 0, got {self.timeout_s!r}")
        if self.dtype is not None:
            try:
                parse_dtype(self.dtype)
            except ValueError as error:
                raise SyncConfigError(f"WeightSyncConfig.dtype: {error}") from None


@dataclass(frozen=True)
class SyncReport:
    """What one sync moved and how long each phase took (seconds)."""

    version: int
    tensors: int
    buckets: int
    nbytes: int
    checksum: str | None
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()
    """Engines the sync left out because they did not answer (a server fleet's dead servers), by address."""


class WeightSync:
    """Runs the weight-sync protocol from the trainer over one transport to one or more engines."""

    def __init__(
        self, engines: Sequence[InferenceEngine], transport: WeightTransport, config: WeightSyncConfig | None = None
    ) -> None:
        if not engines:
            raise SyncConfigError("WeightSync needs at least one engine")
        self.engines = list(engines)
        self.transport = transport
        self.config = config or WeightSyncConfig()
        for index, engine in enumerate(self.engines):
            if transport.capability not in engine.capabilities:
                raise SyncConfigError(
                    f"engine {index} ({type(engine).__name__}) lacks capability {transport.capability!r} needed by "
                    f"the {transport.name} transport; it supports {sorted(engine.capabilities)}"
                )
        self._caller = EngineCaller(max_workers=max(4, 2 * len(self.engines)), inline=self.config.inline_calls)
        self._dtype = parse_dtype(self.config.dtype) if self.config.dtype else None

    @classmethod
    def from_config(
        cls, config: WeightSyncConfig, engines: Sequence[InferenceEngine], transport: WeightTransport
    ) -> WeightSync:
        """Build from a config (the transport is a separate component)."""
        return cls(engines, transport, config)

    def _context(self, version: int) -> SyncContext:
        return SyncContext(self.engines, self._caller, self.config.timeout_s, version)

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        """Push every bucket, label the engines' weights with policy version `version` (an int >= 0), verify,
        resume. See the module doc."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise SyncConfigError(f"version must be the policy version, an int >= 0, got {version!r}")
        ctx = self._context(version)
        seconds: dict[str, float] = {}
        mark = time.perf_counter()

        def lap(phase: str) -> None:
            nonlocal mark
            now = time.perf_counter()
            seconds[phase] = seconds.get(phase, 0.0) + now - mark
            mark = now

        mode = self.config.pause_mode
        leave_paused = False
        if any(_SLEEP_CAPABILITY in engine.capabilities for engine in self.engines):
            ctx.call_each(_wake_if_asleep, "wake_up")
            lap("wake")
        try:
            ctx.call_each(lambda e: e.pause(mode, timeout_s=self.config.timeout_s), f"pause({mode!r})")
            lap("pause")
            records, count, nbytes = self._transfer(ctx, buckets, lap)
            ctx.call_each(lambda e: e.flush_cache(), "flush_cache")
            lap("flush")
            ctx.call_each(lambda e: e.set_weight_version(version), "set_weight_version")
            lap("version")
            checksum = digest_records(records) if self.config.verify else None
            if checksum is not None:
                leave_paused = True
                self._verify(ctx, version, sorted(records), checksum)
                leave_paused = False
                lap("verify")
        finally:
            if not leave_paused:
                ctx.call_each(lambda e: e.resume(), "resume")
                lap("resume")
        logger.info("synced version %r: %d tensors, %.1f MiB, %s", version, len(records), nbytes / 2**20, seconds)
        return SyncReport(version, len(records), count, nbytes, checksum, seconds)

    def _transfer(
        self, ctx: SyncContext, buckets: Iterable[Bucket], lap: Callable[[str], None]
    ) -> tuple[dict[str, str], int, int]:
        records: dict[str, str] = {}
        count = nbytes = 0
        self.transport.begin(ctx)
        try:
            lap("begin")
            for bucket in buckets:
                bucket = self._prepare(bucket, records)
                lap("prepare")
                self.transport.send(ctx, bucket)
                count += 1
                nbytes += sum(t.nbytes for _, t in bucket)
                lap("send")
            if count == 0:
                raise SyncConfigError("the bucket iterable was empty; export at least one tensor")
            self.transport.finish(ctx)
            lap("finish")
        except BaseException:
            self.transport.cancel(ctx)
            raise
        return records, count, nbytes

    def _prepare(self, bucket: Bucket, records: dict[str, str]) -> Bucket:
        out, names = [], set()
        for name, tensor in bucket:
            if name in records or name in names:
                raise SyncError(f"tensor {name!r} was exported twice in one sync; each name must appear once")
            tensor = tensor.detach()
            if self._dtype is not None and tensor.is_floating_point() and tensor.dtype != self._dtype:
                tensor = tensor.to(self._dtype)
            out.append((name, tensor))
            names.add(name)
        lines = checksum_records(out) if self.config.verify else [""] * len(out)
        records.update((name, line) for (name, _), line in zip(out, lines, strict=True))
        return out

    def _verify(self, ctx: SyncContext, version: int, names: list[str], checksum: str) -> None:
        versions = ctx.call_each(lambda e: e.weight_version(), "weight_version")
        sums = ctx.call_each(lambda e: e.weights_checksum(names), "weights_checksum")
        for index, (got_version, got_sum) in enumerate(zip(versions, sums, strict=True)):
            if got_version != version:
                raise SyncError(
                    f"engine {index} reports weight version {got_version!r} after a sync of {version!r}; it may have "
                    "ignored set_weight_version. The engines stay paused."
                )
            if got_sum != checksum:
                raise SyncError(
                    f"engine {index} weights checksum {got_sum[:12]}… differs from the trainer's {checksum[:12]}… "
                    f"over {len(names)} tensors: the engine holds stale or partial weights, or stores another dtype "
                    "than sent (set WeightSyncConfig.dtype to the engine's dtype). The engines stay paused."
                )

    def close(self) -> None:
        """Release the transport's resources and worker threads."""
        self.transport.close(self._context(_NO_VERSION))
        self._caller.close()


def _wake_if_asleep(engine: InferenceEngine) -> None:
    if _SLEEP_CAPABILITY in engine.capabilities and engine.status().state == "asleep":
        engine.wake_up()


def as_buckets(named: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int) -> Iterable[Bucket]:
    """Group `(name, tensor)` pairs into buckets of at most `bucket_bytes` (a larger tensor gets its own)."""
    if bucket_bytes < 1:
        raise SyncConfigError(f"bucket_bytes must be >= 1, got {bucket_bytes}")
    bucket: Bucket = []
    size = 0
    for name, tensor in named:
        if bucket and size + tensor.nbytes > bucket_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += tensor.nbytes
    if bucket:
        yield bucket
