"""The batched decoding loop of `HFEngine`: left-padded prefill, KV-cached decode, per-row stopping.

Positions follow `transformers` `generate` (cumulative attention mask minus one), so greedy output equals
`model.generate` up to floating-point reduction order. Finished rows are dropped from the batch (and the
KV cache) at once. Between steps the loop asks the engine's gate whether to abort or park.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel

from rl_engines._kv_cache import cache_arg
from rl_engines.rollout._decode_step import DecodeStep, FastStep, ModelStep
from rl_engines.rollout._fast_decode import FastDecoder, PrefillKV
from rl_engines.rollout._gate import RequestGate, Ticket
from rl_engines.rollout._sampling import BatchSampler
from rl_engines.rollout._types import FinishReason, GenerateOutput, GenerateRequest, TokenCallback, VersionSpan


@dataclass
class DecodeSetup:
    """What the loop needs from the engine besides the requests."""

    model: PreTrainedModel
    device: torch.device
    pad_id: int
    eos_ids: frozenset[int]
    context_len: int
    step_lock: threading.Lock
    shared_generator: torch.Generator
    weights_epoch: Callable[[], int]
    boolean_mask: bool = False
    """Decode steps through the forward take a ready boolean mask (see `ModelStep`)."""
    fast_decoder: FastDecoder | None = None
    """Prefill and decode steps through `FastDecoder` instead of the model's forward."""

    def step_for(
        self, cache: DynamicCache | PrefillKV, mask: torch.Tensor, last: torch.Tensor, capacity: int
    ) -> DecodeStep:
        """The decode step of one batch whose prefill filled `cache`, with padding mask `mask: (B, W)` and last
        positions `last: (B,)`; no row fills more than `capacity` columns."""
        if self.fast_decoder is not None:
            if isinstance(cache, PrefillKV):
                return FastStep(self.fast_decoder, cache, mask, last, capacity)
        elif isinstance(cache, DynamicCache):
            return ModelStep(self.model, cache, mask, last, self.boolean_mask)
        raise TypeError(
            f"a {type(cache).__name__} cache is not what this setup's prefill makes "
            f"({'PrefillKV' if self.fast_decoder is not None else 'DynamicCache'})"
        )


class PrefillCache:
    """The last `capacity` prefills (KV cache and last logits) keyed by their batch of prompts.

    An entry also remembers the weights epoch it was computed under and is ignored once weights change,
    besides being dropped by `clear` (the engine's `flush_cache`).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, tuple[int, tuple]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, epoch: int) -> tuple | None:
        """A private copy of the entry under `key` computed at `epoch`, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != epoch:
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return copy.deepcopy(entry[1])

    def put(self, key: Hashable, epoch: int, value: tuple) -> None:
        """Store a private copy of `value`."""
        if self.capacity <= 0:
            return
        with self._lock:
            self._entries[key] = (epoch, copy.deepcopy(value))
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()


@dataclass
class _Row:
    request: GenerateRequest
    budget: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    finish: FinishReason | None = None


def _prefill(setup: DecodeSetup, rows: list[_Row]) -> tuple:
    """KV cache (a `PrefillKV` under the fast decoder, else a `DynamicCache`), last logits `(B, V)`, attention mask
    `(B, W)` and last positions `(B,)` of the rows' prompts.

    A prompt that several rows share (a GRPO group's samples) runs through the model once; its cache and logits
    are then copied to each of its rows, which is what a forward over the repeated rows would compute."""
    distinct: dict[tuple[int, ...], int] = {}
    source = [distinct.setdefault(row.request.input_ids, len(distinct)) for row in rows]
    prompts = list(distinct)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), setup.pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        mask[i, width - len(prompt) :] = 1
    ids, mask = ids.to(setup.device), mask.to(setup.device)
    positions = (mask.cumsum(-1) - 1).clamp_(min=0)
    if setup.fast_decoder is not None:
        cache, logits = setup.fast_decoder.prefill(ids, mask, positions)
    else:
        cache = DynamicCache(config=setup.model.config)
        out = setup.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{cache_arg(type(setup.model)): cache},
        )
        logits = out.logits[:, -1, :]
    logits, last_pos = logits.float(), positions[:, -1]
    if len(prompts) < len(rows):
        index = torch.tensor(source, device=setup.device)
        cache.batch_select_indices(index)
        logits, mask, last_pos = logits[index], mask[index], last_pos[index]
    return cache, logits, mask, last_pos


def _spans(versions: list[int]) -> tuple[VersionSpan, ...]:
    spans: list[VersionSpan] = []
    start = 0
    for end in range(1, len(versions) + 1):
        if end == len(versions) or versions[end] != versions[start]:
            spans.append(VersionSpan(versions[start], start, end))
            start = end
    return tuple(spans)


def _finish(row: _Row, token: int, setup: DecodeSetup) -> FinishReason | None:
    sampling = row.request.sampling
    if token in sampling.stop_token_ids or (not sampling.ignore_eos and token in setup.eos_ids):
        return "stop"
    return "length" if len(row.tokens) >= row.budget else None


@torch.inference_mode()
def decode_batch(
    setup: DecodeSetup,
    requests: Sequence[GenerateRequest],
    gate: RequestGate,
    ticket: Ticket,
    prefill_cache: PrefillCache,
    on_tokens: TokenCallback | None = None,
) -> list[GenerateOutput]:
    """Generate every request of one batch to completion, abort or context end; outputs in request order."""
    rows = [_Row(r, min(r.sampling.max_new_tokens, setup.context_len - len(r.input_ids))) for r in requests]
    sampler = BatchSampler([r.sampling for r in requests], setup.device, setup.shared_generator)
    aborted = gate.checkpoint(ticket)
    for row in rows:
        if aborted is None or row.request.rid in aborted:
            row.finish = "abort"
    active = [i for i, row in enumerate(rows) if row.finish is None]
    if active and len(active) < len(rows):
        sampler.select(active)
    with setup.step_lock:
        version = gate.version
        if active:
            key = tuple(rows[i].request.input_ids for i in active)
            state = prefill_cache.get(key, setup.weights_epoch())
            if state is None:
                state = _prefill(setup, [rows[i] for i in active])
                prefill_cache.put(key, setup.weights_epoch(), state)
            cache, logits, mask, last_pos = state
            step = setup.step_for(cache, mask, last_pos, mask.shape[-1] + max(rows[i].budget for i in active))
    while active:
        tokens, logprobs = sampler(logits)
        events = []
        # One conversion per step: indexing the tensors row by row cost more than the sampling itself.
        for i, token, logprob in zip(active, tokens.tolist(), logprobs.tolist(), strict=True):
            row = rows[i]
            row.tokens.append(token)
            row.logprobs.append(logprob)
            row.versions.append(version)
            row.finish = _finish(row, token, setup)
            events.append((row.request.rid, token, logprob))
        if on_tokens is not None:
            on_tokens(events)
        aborted = gate.checkpoint(ticket)
        for i in active:
            if rows[i].finish is None and (aborted is None or rows[i].request.rid in aborted):
                rows[i].finish = "abort"
        keep = [j for j, i in enumerate(active) if rows[i].finish is None]
        if not keep:
            break
        if len(keep) < len(active):
            index = torch.tensor(keep, device=setup.device)
            step.select(index)
            tokens = tokens[index]
            sampler.select(keep)
            active = [active[j] for j in keep]
        with setup.step_lock:
            version = gate.version
            logits = step(tokens)
    outputs = []
    for row in rows:
        return_logprobs = row.request.return_logprobs
        outputs.append(
            GenerateOutput(
                rid=row.request.rid,
                output_ids=tuple(row.tokens),
                output_logprobs=tuple(row.logprobs) if return_logprobs else None,
                finish_reason=row.finish or "abort",
                weight_version=row.versions[-1] if row.versions else gate.version,
                prompt_len=len(row.request.input_ids),
                version_spans=_spans(row.versions),
            )
        )
    return outputs
