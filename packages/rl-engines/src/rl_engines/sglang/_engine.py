"""`SGLangEngine`: `sglang.Engine` (offline, GPU only) behind the `InferenceEngine` protocol.

Written against SGLang's documented Engine API (`generate(input_ids=..., sampling_params=..., rid=...,
return_logprob=..., stream=...)`, `update_weights_from_disk / _tensor / _distributed`,
`init_weights_update_group`, `destroy_weights_update_group`, `release_memory_occupation`,
`resume_memory_occupation`, `flush_cache`) plus its tokenizer manager for pause / continue / abort and the
weight version, which the Engine class does not expose in every release. Outputs are the same JSON as HTTP
`/generate`, decoded by the `rl_engines.remote` wire helpers. SGLang has no exact weights checksum: run
`WeightSync` with `verify=False`. Untested here: sglang installs on neither the CPU machines nor the GPU one.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any, Literal

from rl_engines.remote import logprob_pairs, output_from_json, sampling_to_json
from rl_engines.rollout import (
    EngineStateError,
    EngineStatus,
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    LogprobMode,
    NamedTensors,
    PauseMode,
    SharedTensorBucket,
    TokenCallback,
    WeightGroupSpec,
    WeightsMeta,
    WeightUpdateError,
    check_requests,
    open_shared_bucket,
)
from rl_engines.rollout._submit import agenerate_by_submit, failed_future
from rl_engines.rollout._types import check_weight_version, weight_version_from_wire, weight_version_to_wire
from rl_engines.sglang._batcher import SubmitBatcher
from rl_engines.sglang._config import SGLangEngineConfig

logger = logging.getLogger(__name__)

_PAUSE_MODE = {"abort": "abort", "keep": "in_place"}
"""SGLang's pause modes for ours; it has no "wait" (drain) mode."""


def import_sglang() -> Any:
    """The sglang module, or an ImportError naming the extra that provides it."""
    try:
        import sglang  # pyright: ignore[reportMissingImports]  # the optional [sglang] extra, absent from the lint venv
    except ImportError as error:
        raise ImportError("SGLangEngine needs SGLang on a CUDA machine: pip install 'rl-engines[sglang]'") from error
    return sglang


def _check(result: Any, what: str) -> None:
    """Raise `WeightUpdateError` for SGLang's `(success, message, ...)` failure answers."""
    if isinstance(result, tuple) and result and result[0] is False:
        raise WeightUpdateError(f"{what}: {result[1] if len(result) > 1 else 'failed'}")


class SGLangEngine:
    """An `InferenceEngine` on `sglang.Engine`; see the module doc."""

    capabilities = frozenset({"disk", "tensor", "distributed", "sleep", "pause", "abort", "prefix_cache", "seed"})

    def __init__(self, config: SGLangEngineConfig) -> None:
        sglang = import_sglang()
        self.config = config
        kwargs = {
            "model_path": config.model_path,
            "skip_tokenizer_init": True,
            "dtype": config.dtype,
            "tp_size": config.tp_size,
            "mem_fraction_static": config.mem_fraction_static,
            "enable_memory_saver": config.enable_memory_saver,
            "weight_version": weight_version_to_wire(config.initial_version),
        }
        self._engine = sglang.Engine(**{**kwargs, **config.extra_engine_args})
        self._tm = self._engine.tokenizer_manager
        self._group_name: str | None = None
        self._paused: PauseMode | None = None
        self._asleep: frozenset[str] = frozenset()
        self._closed = False
        self._batcher = SubmitBatcher(self._generate_batch, self.abort, self.weight_version)
        self._generate_lock = threading.Lock()

    @classmethod
    def from_config(cls, config: SGLangEngineConfig) -> SGLangEngine:
        """Launch SGLang's scheduler processes and load the model."""
        return cls(config)

    @property
    def logprob_mode(self) -> LogprobMode:
        """SGLang reports log-probs after temperature scaling unless SGLANG_RETURN_ORIGINAL_LOGPROB is set."""
        return (
            "raw" if os.environ.get("SGLANG_RETURN_ORIGINAL_LOGPROB", "0").lower() in ("1", "true") else "temperature"
        )

    def _run(self, coroutine: Any) -> Any:
        return self._engine.loop.run_until_complete(coroutine)

    # ---- generation ------------------------------------------------------------------------------
    def submit(
        self, request: GenerateRequest, *, on_tokens: TokenCallback | None = None
    ) -> concurrent.futures.Future[GenerateOutput]:
        """See `InferenceEngine.submit`: requests submitted while a batch runs go to SGLang together as the next
        batch (`SubmitBatcher`)."""
        try:
            check_requests([request])
        except Exception as error:
            return failed_future(error)
        return self._batcher.submit(request, on_tokens)

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        """See `InferenceEngine.agenerate`."""
        return await agenerate_by_submit(self.submit, self.cancel, request)

    def cancel(self, rid: str) -> None:
        """See `InferenceEngine.cancel` (SGLang's `abort_request(rid=...)` once it runs)."""
        self._batcher.cancel(rid)

    def _generate_batch(self, batch: list[GenerateRequest], on_tokens: TokenCallback | None) -> list[GenerateOutput]:
        return self.generate(batch, on_tokens=on_tokens)

    def generate(
        self, requests: Sequence[GenerateRequest], *, on_tokens: TokenCallback | None = None
    ) -> list[GenerateOutput]:
        """See `InferenceEngine.generate` (one call at a time: `sglang.Engine` runs its event loop in the caller)."""
        with self._generate_lock:
            return self._generate_locked(check_requests(requests), on_tokens)

    def _generate_locked(self, batch: list[GenerateRequest], on_tokens: TokenCallback | None) -> list[GenerateOutput]:
        kwargs = {
            "input_ids": [list(r.input_ids) for r in batch],  # not-a-sample-field: SGLang's argument
            "sampling_params": [sampling_to_json(r.sampling) for r in batch],
            "rid": [r.rid for r in batch],
            "return_logprob": [r.return_logprobs for r in batch],
        }
        if on_tokens is None:
            results = self._engine.generate(**kwargs)
            return [output_from_json(d, r) for d, r in zip(results, batch, strict=True)]
        finals: dict[int, GenerateOutput] = {}
        seen = [0] * len(batch)
        for chunk in self._engine.generate(**kwargs, stream=True):  # cumulative chunks, "index" per request
            index = int(chunk.get("index", 0))
            ids, pairs = chunk["output_ids"], logprob_pairs(chunk["meta_info"])
            new = [
                (batch[index].rid, t, pairs[seen[index] + j][0] if pairs else float("nan"))
                for j, t in enumerate(ids[seen[index] :])
            ]
            seen[index] = len(ids)
            if new:
                on_tokens(new)
            if chunk["meta_info"].get("finish_reason") is not None:
                finals[index] = output_from_json(chunk, batch[index])
        return [finals[i] for i in range(len(batch))]

    def pause(self, mode: PauseMode = "abort", *, timeout_s: float | None = None) -> None:
        """See `InferenceEngine.pause`; "wait" is not available in SGLang."""
        if mode not in _PAUSE_MODE:
            raise InvalidRequestError(f"SGLangEngine pauses with 'abort' or 'keep' (SGLang has no drain), got {mode!r}")
        from sglang.srt.managers.io_struct import (  # pyright: ignore[reportMissingImports]  # optional extra
            PauseGenerationReqInput,
        )

        self._run(self._tm.pause_generation(PauseGenerationReqInput(mode=_PAUSE_MODE[mode])))
        self._paused = mode

    def resume(self) -> None:
        """See `InferenceEngine.resume`."""
        from sglang.srt.managers.io_struct import (  # pyright: ignore[reportMissingImports]  # optional extra
            ContinueGenerationReqInput,
        )

        self._run(self._tm.continue_generation(ContinueGenerationReqInput()))
        self._paused = None

    def abort(self, rids: Collection[str] | None = None) -> None:
        """See `InferenceEngine.abort`."""
        if rids is None:
            self._tm.abort_request(abort_all=True)
        for rid in rids or ():
            self._tm.abort_request(rid=rid)

    def sleep(self, level: Literal[1, 2] = 1) -> None:
        """See `InferenceEngine.sleep`: SGLang releases weights and KV cache (weights are lost unless it backs
        them up on the CPU), so a full weight update is needed after `wake_up` either way."""
        self._engine.release_memory_occupation()
        self._asleep = frozenset({"weights", "kv_cache"})

    def wake_up(self, tags: Collection[str] | None = None) -> None:
        """See `InferenceEngine.wake_up`."""
        self._engine.resume_memory_occupation(tags=None if tags is None else list(tags))
        self._asleep = self._asleep - frozenset(tags or ("weights", "kv_cache"))

    # ---- weights ---------------------------------------------------------------------------------
    def update_weights_from_disk(self, path: str | os.PathLike[str]) -> None:
        """See `InferenceEngine.update_weights_from_disk`."""
        _check(self._engine.update_weights_from_disk(model_path=os.fspath(path)), "update_weights_from_disk")

    def update_weights_from_tensors(self, tensors: NamedTensors | SharedTensorBucket) -> frozenset[str]:
        """See `InferenceEngine.update_weights_from_tensors` (SGLang sends CUDA IPC handles to its workers)."""
        named = open_shared_bucket(tensors) if isinstance(tensors, SharedTensorBucket) else list(tensors)
        result = self._engine.update_weights_from_tensor(named_tensors=named, flush_cache=False)
        _check(result, "update_weights_from_tensor")
        return frozenset()  # SGLang copies into its own weights

    def init_weights_update_group(self, spec: WeightGroupSpec) -> None:
        """See `InferenceEngine.init_weights_update_group`."""
        result = self._engine.init_weights_update_group(
            master_address=spec.master_address,
            master_port=spec.master_port,
            rank_offset=spec.rank_offset,
            world_size=spec.world_size,
            group_name=spec.group_name,
            backend=spec.backend,
        )
        _check(result, "init_weights_update_group")
        self._group_name = spec.group_name

    def update_weights_from_distributed(self, meta: WeightsMeta) -> None:
        """See `InferenceEngine.update_weights_from_distributed`."""
        result = self._engine.update_weights_from_distributed(
            names=list(meta.names),
            dtypes=list(meta.dtypes),
            shapes=[list(s) for s in meta.shapes],
            group_name=self._group_name or "weight_update_group",
            flush_cache=False,
        )
        _check(result, "update_weights_from_distributed")

    def destroy_weights_update_group(self) -> None:
        """See `InferenceEngine.destroy_weights_update_group`."""
        name, self._group_name = self._group_name, None
        if name is not None:
            _check(self._engine.destroy_weights_update_group(group_name=name), "destroy_weights_update_group")

    def flush_cache(self) -> None:
        """See `InferenceEngine.flush_cache`; retried while SGLang refuses because requests remain."""
        deadline = time.monotonic() + self.config.timeout_s
        while not getattr(self._engine.flush_cache(), "success", True):
            if time.monotonic() > deadline:
                raise EngineStateError(f"SGLang refused to flush its cache for {self.config.timeout_s} s; pause first")
            time.sleep(self.config.flush_retry_s)

    def set_weight_version(self, version: int) -> None:
        """See `InferenceEngine.set_weight_version` (what SGLang's `/update_weight_version` does; SGLang keeps
        the version as a str, so it is converted here)."""
        check_weight_version(version, "weight version")
        self._tm.server_args.weight_version = weight_version_to_wire(version)

    def weight_version(self) -> int:
        """See `InferenceEngine.weight_version` (SGLang's str, as an int)."""
        return weight_version_from_wire(self._tm.server_args.weight_version, "SGLang's server_args.weight_version")

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """Not available: SGLang stores fused, possibly sharded tensors under other names."""
        raise EngineStateError("SGLangEngine cannot checksum its weights; run WeightSync with verify=False")

    # ---- lifecycle -------------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        """See `InferenceEngine.status` (in-flight counts are not tracked: 0)."""
        state = "stopped" if self._closed else "asleep" if self._asleep else "paused" if self._paused else "serving"
        return EngineStatus(state, self.weight_version(), 0, pause_mode=self._paused, asleep=self._asleep)

    def health(self) -> bool:
        """True until `shutdown`."""
        return not self._closed

    def shutdown(self) -> None:
        """Stop SGLang's processes."""
        if not self._closed:
            self._closed = True
            self._batcher.shutdown()
            self._engine.shutdown()
