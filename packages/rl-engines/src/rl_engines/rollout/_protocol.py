"""`InferenceEngine`: the protocol every rollout engine implements (in-process, remote, vLLM, SGLang).

Token ids in, token ids out. Methods are thread-safe: several threads may call `generate` at once while a
controller thread pauses, updates and resumes the engine.

Asynchronous requests: `submit(request)` returns a `concurrent.futures.Future` at once and the request joins the
engine's running work; `await agenerate(request)` is the same from asyncio, so many episodes run concurrently on
one engine from one event loop; `cancel(rid)` ends a request with finish reason "abort" (partial tokens kept).
Errors (a bad request, a refused admission, a timeout) arrive through the Future. `generate(requests)` is the
batch form: submit all, wait for all, outputs in request order.

Weight sync protocol (what `rl_engines.sync.WeightSync` drives):
    pause(mode) -> update_weights_from_{disk,tensors,distributed} (one call per bucket)
    -> flush_cache() -> set_weight_version(v) -> check weight_version() and weights_checksum(names)
    -> resume()
An engine refuses new requests between the first weight change and `set_weight_version`
(`UnversionedWeightsError`), so no output can claim a version it was not produced with.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Collection, Sequence
from typing import Literal, Protocol, runtime_checkable

from rl_engines.rollout._handles import SharedTensorBucket
from rl_engines.rollout._types import (
    EngineStatus,
    GenerateOutput,
    GenerateRequest,
    LogprobMode,
    PauseMode,
    TokenCallback,
)
from rl_engines.rollout._weight_types import NamedTensors, WeightGroupSpec, WeightsMeta

Capability = Literal[
    "disk", "tensor", "distributed", "sleep", "pause", "abort", "prefix_cache", "seed", "stream", "bounded_calls"
]
"""What an engine supports beyond `generate`; the conformance suite skips checks for missing ones.

disk / tensor / distributed: the three weight-update transports. sleep: `sleep`/`wake_up` release and
restore weights. pause: the three pause modes. abort: `abort(rids)`. prefix_cache: caches prompt state
(so `flush_cache` matters). seed: per-request seeds independent of batchmates. stream: `on_tokens`.
bounded_calls: the engine runs in the caller's process and each of its control calls (pause, updates, version,
checksum, resume) returns or raises within its own configured wait, so a weight sync may make them on the
trainer's thread (`WeightSyncConfig.inline_calls`) instead of handing each to a watchdog thread.
"""


@runtime_checkable
class InferenceEngine(Protocol):
    """A rollout engine serving token-in/token-out generation with versioned, updatable weights."""

    @property
    def capabilities(self) -> frozenset[str]:
        """The `Capability` names this engine supports."""
        ...

    @property
    def logprob_mode(self) -> LogprobMode:
        """Either "temperature" (log-probs of `softmax(logits / T)`, raw logits at T = 0) or "raw" (raw logits)."""
        ...

    def submit(
        self, request: GenerateRequest, *, on_tokens: TokenCallback | None = None
    ) -> concurrent.futures.Future[GenerateOutput]:
        """Start `request` and return at once; the Future resolves with its output, or with the error `generate`
        would raise for it. `on_tokens` is called with this request's tokens as they are produced ("stream")."""
        ...

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        """Await `request`'s output on the running event loop (`submit` made awaitable); cancelling the awaiting
        task cancels the request."""
        ...

    def cancel(self, rid: str) -> None:
        """End request `rid` with finish reason "abort", keeping the tokens it has; unknown or finished rids are a
        no-op. A request parked by `pause("keep")` ends when generation resumes."""
        ...

    def generate(
        self, requests: Sequence[GenerateRequest], *, on_tokens: TokenCallback | None = None
    ) -> list[GenerateOutput]:
        """Generate every request; outputs in request order.

        Raises `InvalidRequestError` (empty list, empty or too-long prompt, bad token id, duplicate rid),
        `EngineAsleepError`, `WeightsNotLoadedError`, `UnversionedWeightsError`, or `EngineTimeoutError`
        after waiting too long while paused. The engine keeps serving after any of them.
        """
        ...

    def pause(self, mode: PauseMode = "abort", *, timeout_s: float | None = None) -> None:
        """Stop admitting requests (new calls wait for `resume`), then: "abort" ends in-flight requests with
        finish reason "abort" (partial tokens kept); "wait" lets them finish; "keep" parks them between
        decoding steps to continue after `resume` (with whatever weights are then loaded). Returns when done."""
        ...

    def resume(self) -> None:
        """Admit requests again and continue parked ones."""
        ...

    def abort(self, rids: Collection[str] | None = None) -> None:
        """End the in-flight requests `rids` (None: all) with finish reason "abort", without pausing."""
        ...

    def sleep(self, level: Literal[1, 2] = 1) -> None:
        """Release memory: level 1 offloads weights (kept) and frees the KV cache; level 2 discards weights,
        so a full weight update is needed after `wake_up`. `generate` raises `EngineAsleepError` meanwhile."""
        ...

    def wake_up(self, tags: Collection[str] | None = None) -> None:
        """Restore "weights" and/or "kv_cache" (None: both). Updates may run once weights are awake."""
        ...

    def update_weights_from_disk(self, path: str | os.PathLike[str]) -> None:
        """Load every tensor in the safetensors checkpoint at `path` (a directory, with or without an index)."""
        ...

    def update_weights_from_tensors(self, tensors: NamedTensors | SharedTensorBucket) -> Collection[str] | None:
        """Load one bucket handed over by reference (same process) or by shared-memory/CUDA-IPC handles.

        Returns the `buffer_id`s of lent buckets (`SharedTensorBucket.lend`) whose memory the engine kept as
        its weights and still uses; the sender must not rewrite those. An engine that always copies returns
        None (or an empty collection).
        """
        ...

    def init_weights_update_group(self, spec: WeightGroupSpec) -> None:
        """Join the trainer's weight-update group at rank `spec.rank_offset` (blocks until all ranks join)."""
        ...

    def update_weights_from_distributed(self, meta: WeightsMeta) -> None:
        """Receive `meta.names` by broadcast from rank 0, in order, and load them. A rejected bucket is still
        received in full (so the trainer never hangs) and then raises `WeightUpdateError`."""
        ...

    def destroy_weights_update_group(self) -> None:
        """Leave the weight-update group."""
        ...

    def flush_cache(self) -> None:
        """Drop every cached prompt state, so nothing computed with older weights is reused."""
        ...

    def set_weight_version(self, version: int) -> None:
        """Label the loaded weights with policy version `version` (an int >= 0); outputs report it from now on."""
        ...

    def weight_version(self) -> int:
        """The policy version of the loaded weights."""
        ...

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """`rl_engines.rollout.weights_checksum` of the stored tensors `names` (None: all)."""
        ...

    def status(self) -> EngineStatus:
        """State, version and in-flight count."""
        ...

    def health(self) -> bool:
        """True unless the engine was shut down; `status()` tells whether it is paused, asleep or unloaded."""
        ...

    def shutdown(self) -> None:
        """Abort in-flight requests and release resources; later calls raise `EngineShutdownError`."""
        ...
