"""`HFEngine`: in-process transformers generation behind the `InferenceEngine` protocol."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import threading
from collections.abc import Collection, Sequence
from typing import Literal, cast

import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM, PreTrainedModel

from rl_engines._attention import takes_boolean_4d_mask
from rl_engines.rollout._errors import (
    EngineAsleepError,
    EngineStateError,
    InvalidRequestError,
    PromptTooLongError,
    WeightUpdateError,
)
from rl_engines.rollout._fast_decode import FastDecoder
from rl_engines.rollout._gate import RequestGate
from rl_engines.rollout._handles import SharedTensorBucket, open_shared_bucket
from rl_engines.rollout._hf_config import HFEngineConfig
from rl_engines.rollout._hf_generation import DecodeSetup, PrefillCache
from rl_engines.rollout._hf_scoring import TokenScores, score_tokens
from rl_engines.rollout._hf_weights import ModelWeights, iter_safetensors, safetensors_files
from rl_engines.rollout._running_batch import Entry
from rl_engines.rollout._scheduler import Scheduler
from rl_engines.rollout._submit import agenerate_by_submit, failed_future
from rl_engines.rollout._types import (
    SLEEP_TAGS,
    EngineStatus,
    GenerateOutput,
    GenerateRequest,
    LogprobMode,
    PauseMode,
    TokenCallback,
    check_requests,
    check_weight_version,
)
from rl_engines.rollout._weight_group import WeightGroup
from rl_engines.rollout._weight_types import NamedTensors, WeightGroupSpec, WeightsMeta, parse_dtype

logger = logging.getLogger(__name__)

_KEEP_MAPPED = 2
"""Shared buffers kept mapped between updates: the sender alternates two (see SharedMemoryTransport)."""


def _eos_ids(model: PreTrainedModel, config: HFEngineConfig) -> frozenset[int]:
    if config.eos_token_ids is not None:
        return frozenset(config.eos_token_ids)
    generation = getattr(model, "generation_config", None)
    eos = getattr(generation, "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    if eos is None:
        return frozenset()
    return frozenset([eos] if isinstance(eos, int) else eos)


class HFEngine:
    """Batched transformers generation with a KV cache, pausable and updatable in place.

    Requests (`submit`, `agenerate`, `generate`) go to one scheduler thread that decodes them in one running
    batch of at most `max_batch_size` rows: requests join it between steps as others finish (continuous
    batching, `_scheduler.py`; docs/async-requests.md), and a `generate` call's requests join together.
    Log-probs are those of `log_softmax(logits / temperature)` at the chosen tokens (raw logits for greedy
    requests), before top-k / top-p truncation.

    Seeds: a request with `seed` draws from its own generator, one draw per step counted from when it joined,
    so its sample does not depend on its batchmates' draws; its logits match the unbatched ones only up to
    floating-point order, so batches of different composition agree except at draws within ~1e-6 of a
    boundary. Requests
    without a seed share the engine's generator (`HFEngineConfig.seed`). See `InferenceEngine` for the
    semantics of each method.
    """

    capabilities = frozenset(
        {"disk", "tensor", "distributed", "sleep", "pause", "abort", "prefix_cache", "seed", "stream", "bounded_calls"}
    )

    def __init__(self, model: PreTrainedModel, config: HFEngineConfig | None = None) -> None:
        self.config = config or HFEngineConfig()
        self.device = torch.device(self.config.device)
        # transformers wraps PreTrainedModel.to in functools.wraps(Module.to), which the checker binds wrongly.
        moved = model.to(device=self.device, dtype=parse_dtype(self.config.dtype))  # pyright: ignore[reportCallIssue]
        self.model: PreTrainedModel = moved.eval().requires_grad_(False)
        self._weights = ModelWeights(self.model)
        self._gate = RequestGate(
            admission_timeout_s=self.config.admission_timeout_s,
            drain_timeout_s=self.config.drain_timeout_s,
            initial_version=self.config.initial_version,
        )
        generator = torch.Generator(device=self.device)
        if self.config.seed is None:
            generator.seed()
        else:
            generator.manual_seed(self.config.seed)
        self.context_len = self.config.context_len or int(self.model.config.max_position_embeddings)
        # A causal LM's input embeddings are an nn.Embedding; transformers types them as any Module.
        self.vocab_size = int(cast(torch.nn.Embedding, self.model.get_input_embeddings()).num_embeddings)
        pad = self.config.pad_token_id if self.config.pad_token_id is not None else self.model.config.pad_token_id
        self._epoch = 0
        self._setup = DecodeSetup(
            model=self.model,
            device=self.device,
            pad_id=int(pad or 0),  # any id works: padded positions are masked out
            eos_ids=_eos_ids(self.model, self.config),
            context_len=self.context_len,
            step_lock=threading.Lock(),
            shared_generator=generator,
            weights_epoch=lambda: self._epoch,
            boolean_mask=takes_boolean_4d_mask(self.model.config.get_text_config()),
            fast_decoder=FastDecoder.for_model(self.model) if self.config.fast_decode else None,
        )
        self._cache = PrefillCache(self.config.prefill_cache_size)
        self._mutation_lock = threading.Lock()
        self._sleep_level = 0
        self._group: WeightGroup | None = None
        self._mapped: dict[str, torch.Tensor] = {}
        self._scheduler = Scheduler(self._setup, self._gate, self._cache, self.config.max_batch_size)

    @classmethod
    def from_config(cls, config: HFEngineConfig) -> HFEngine:
        """Load `config.model_path` with transformers and serve it."""
        if config.model_path is None:
            raise InvalidRequestError("HFEngineConfig.model_path is None; set it or build HFEngine(model, config)")
        kwargs = {"attn_implementation": config.attn_implementation} if config.attn_implementation else {}
        model = AutoModelForCausalLM.from_pretrained(config.model_path, dtype=parse_dtype(config.dtype), **kwargs)
        return cls(model, config)

    @property
    def logprob_mode(self) -> LogprobMode:
        """Log-probs of the temperature-scaled distribution (see the class doc)."""
        return "temperature"

    # ---- generation ------------------------------------------------------------------------------
    def _check(self, request: GenerateRequest) -> None:
        if len(request.input_ids) >= self.context_len:
            raise PromptTooLongError(
                f"request {request.rid!r} has a {len(request.input_ids)}-token prompt, but the context holds "
                f"{self.context_len} tokens and at least one must be generated; shorten the prompt"
            )
        bad = [t for t in request.input_ids if t >= self.vocab_size]
        if bad:
            raise InvalidRequestError(
                f"request {request.rid!r} has token ids {bad[:3]} outside the vocabulary of {self.vocab_size}"
            )

    def _entry(self, request: GenerateRequest, on_tokens: TokenCallback | None) -> Entry:
        budget = min(request.sampling.max_new_tokens, self.context_len - len(request.input_ids))
        return Entry(request, on_tokens, concurrent.futures.Future(), budget)

    def submit(
        self, request: GenerateRequest, *, on_tokens: TokenCallback | None = None
    ) -> concurrent.futures.Future[GenerateOutput]:
        """See `InferenceEngine.submit`: the request joins the running decode batch at the next step boundary."""
        try:
            check_requests([request])
            self._check(request)
        except Exception as error:
            return failed_future(error)
        entry = self._entry(request, on_tokens)
        self._scheduler.submit([entry])
        return entry.future

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        """See `InferenceEngine.agenerate`."""
        return await agenerate_by_submit(self.submit, self.cancel, request)

    def cancel(self, rid: str) -> None:
        """See `InferenceEngine.cancel`."""
        self._scheduler.cancel([rid])

    def generate(
        self, requests: Sequence[GenerateRequest], *, on_tokens: TokenCallback | None = None
    ) -> list[GenerateOutput]:
        """See `InferenceEngine.generate`: the requests are submitted together (one prefill, one batch when nothing
        else runs) and awaited."""
        batch = check_requests(requests)
        for request in batch:
            self._check(request)
        entries = [self._entry(request, on_tokens) for request in batch]
        self._scheduler.submit(entries)
        try:
            return [entry.future.result() for entry in entries]
        except BaseException:
            self._scheduler.cancel([e.request.rid for e in entries if not e.future.done()])
            raise

    def score_tokens(self, ids: Sequence[int], *, start: int, top_k: int, temperature: float) -> TokenScores:
        """Teacher-forced log-probs of `ids` from position `start` (and the `top_k` most likely tokens per position)
        under the served weights, on the distribution the engine samples from (`logprob_mode`); one forward outside
        the decode batch. Serves SGLang's prompt log-probs on the rollout server."""
        self._check_weights_awake()
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad or not 0 < len(ids) <= self.context_len:
            raise InvalidRequestError(
                f"cannot score {len(ids)} tokens (ids {bad[:3]} outside the vocabulary of {self.vocab_size}); send "
                f"1 to {self.context_len} ids within the vocabulary"
            )
        return score_tokens(self._setup, ids, start, top_k, temperature)

    def pause(self, mode: PauseMode = "abort", *, timeout_s: float | None = None) -> None:
        """See `InferenceEngine.pause`."""
        self._gate.pause(mode, timeout_s)

    def resume(self) -> None:
        """See `InferenceEngine.resume`."""
        self._gate.resume()

    def abort(self, rids: Collection[str] | None = None) -> None:
        """See `InferenceEngine.abort` (requests still queued end "abort" at once)."""
        self._scheduler.cancel(None if rids is None else list(rids))

    # ---- memory ----------------------------------------------------------------------------------
    def sleep(self, level: Literal[1, 2] = 1) -> None:
        """See `InferenceEngine.sleep`. On CPU level 1 keeps weights in place (host memory is the target)."""
        if level not in (1, 2):
            raise InvalidRequestError(f"sleep level must be 1 (offload weights) or 2 (discard weights), got {level!r}")
        with self._gate.exclusive(), self._mutation_lock:
            if "weights" not in self._gate.asleep:
                self._weights.discard() if level == 2 else self._weights.offload()
                self._sleep_level = level
            self._cache.clear()
            self._gate.asleep = frozenset(SLEEP_TAGS)
        logger.info("engine asleep (level %d)", level)

    def wake_up(self, tags: Collection[str] | None = None) -> None:
        """See `InferenceEngine.wake_up`."""
        wanted = frozenset(SLEEP_TAGS if tags is None else tags)
        if not wanted or not wanted <= set(SLEEP_TAGS):
            raise InvalidRequestError(f"wake_up tags must be a non-empty subset of {list(SLEEP_TAGS)}, got {tags!r}")
        with self._gate.exclusive(), self._mutation_lock:
            if "weights" in wanted and "weights" in self._gate.asleep:
                if self._sleep_level == 2:
                    self._weights.restore()
                    self._gate.weights_loaded = False
                else:
                    self._weights.onload()
            self._gate.asleep = self._gate.asleep - wanted

    # ---- weights ---------------------------------------------------------------------------------
    def _check_weights_awake(self) -> None:
        if "weights" in self._gate.asleep:
            raise EngineAsleepError("weights are asleep; call wake_up(tags=['weights']) before updating them")

    def _weights_changed(self) -> None:
        self._epoch += 1
        self._cache.clear()
        self._gate.weights_changed()
        self._gate.weights_loaded = self._weights.fully_loaded

    def update_weights_from_disk(self, path: str | os.PathLike[str]) -> None:
        """See `InferenceEngine.update_weights_from_disk`; every file is validated before any is applied."""
        files = safetensors_files(path)
        specs = []
        for file in files:
            with safe_open(str(file), framework="pt") as handle:
                specs += [(name, tuple(handle.get_slice(name).get_shape())) for name in handle.keys()]  # noqa: SIM118
        with self._gate.exclusive(), self._mutation_lock:
            self._check_weights_awake()
            self._weights.validate(specs)
            for bucket in iter_safetensors(path):
                self._weights.apply(bucket, owned=False)
            self._weights_changed()
        logger.info("loaded %d tensors from %s", len(specs), path)

    def update_weights_from_tensors(self, tensors: NamedTensors | SharedTensorBucket) -> frozenset[str]:
        """See `InferenceEngine.update_weights_from_tensors`: lists are copied; a lent CPU bucket is adopted
        (its slots become the weights, no copy); returns the lent buffers the weights still live in."""
        if isinstance(tensors, SharedTensorBucket):
            shared, named = tensors, open_shared_bucket(tensors)
        else:
            shared, named = None, list(tensors)
        lend = shared is not None and shared.lend and shared.kind == "cpu_shm"
        if shared is not None and shared.kind == "cpu_shm" and not lend:
            # Keep the last few mappings alive: the trainer reuses its buffers, and re-mapping the same file
            # for every bucket would fault every page in again.
            self._mapped.pop(shared.buffer_id, None)
            self._mapped[shared.buffer_id] = named[0][1]
            while len(self._mapped) > _KEEP_MAPPED:
                self._mapped.pop(next(iter(self._mapped)))
        if not named:
            raise InvalidRequestError("update_weights_from_tensors got no tensors; send at least one")
        with self._gate.exclusive(), self._mutation_lock:
            self._check_weights_awake()
            self._weights.apply(named, owned=lend, lender=shared.buffer_id if lend and shared is not None else None)
            self._weights_changed()
            return self._weights.lent_buffers()

    def init_weights_update_group(self, spec: WeightGroupSpec) -> None:
        """See `InferenceEngine.init_weights_update_group`."""
        if self._group is not None:
            raise EngineStateError("already in a weight-update group; call destroy_weights_update_group() first")
        self._group = WeightGroup(spec, spec.rank_offset)

    def update_weights_from_distributed(self, meta: WeightsMeta) -> None:
        """See `InferenceEngine.update_weights_from_distributed`."""
        if self._group is None:
            raise EngineStateError("no weight-update group; call init_weights_update_group(spec) first")
        device = self.device if self._group.spec.backend == "nccl" else torch.device("cpu")
        with self._gate.exclusive(), self._mutation_lock:
            rejection: WeightUpdateError | EngineAsleepError | None = None
            try:
                self._check_weights_awake()
                self._weights.validate(zip(meta.names, meta.shapes, strict=True))
            except (WeightUpdateError, EngineAsleepError) as error:
                rejection = error
            received = []
            for name, dtype, shape in zip(meta.names, meta.dtypes, meta.shapes, strict=True):
                buffer = torch.empty(shape, dtype=parse_dtype(dtype), device=device)
                self._group.broadcast(buffer, src=0)
                received.append((name, buffer))
            if rejection is not None:
                raise rejection
            self._weights.apply(received, owned=True)
            self._weights_changed()

    def destroy_weights_update_group(self) -> None:
        """See `InferenceEngine.destroy_weights_update_group`; a no-op without a group."""
        group, self._group = self._group, None
        if group is not None:
            group.close()

    def flush_cache(self) -> None:
        """See `InferenceEngine.flush_cache`."""
        self._cache.clear()

    def set_weight_version(self, version: int) -> None:
        """See `InferenceEngine.set_weight_version`."""
        check_weight_version(version, "weight version")
        with self._gate.exclusive():
            self._gate.set_version(version)

    def weight_version(self) -> int:
        """See `InferenceEngine.weight_version`."""
        return self._gate.version

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """See `InferenceEngine.weights_checksum`."""
        with self._mutation_lock:
            self._check_weights_awake()
            return self._weights.checksum(names)

    # ---- lifecycle -------------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        """See `InferenceEngine.status` (`in_flight` counts requests admitted and not finished)."""
        return dataclasses.replace(self._gate.status(), in_flight=self._scheduler.in_flight())

    def health(self) -> bool:
        """See `InferenceEngine.health`."""
        return self._gate.status().state != "stopped"

    def shutdown(self) -> None:
        """See `InferenceEngine.shutdown`."""
        self._gate.stop()
        self._scheduler.stop(self.config.drain_timeout_s)
        self.destroy_weights_update_group()
        self._cache.clear()
        self._mapped.clear()

    @property
    def prefill_cache_entries(self) -> int:
        """How many prefills the cache holds now."""
        return len(self._cache)
