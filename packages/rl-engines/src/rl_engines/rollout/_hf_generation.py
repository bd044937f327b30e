"""Prefill and decode setup of `HFEngine` (its loop is `_scheduler.py`): left-padded prefill, the prefill cache.

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
from rl_engines.rollout._types import FinishReason, GenerateRequest, VersionSpan


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
    """`prefill` of the rows' prompts."""
    return prefill(setup, [row.request.input_ids for row in rows])


@torch.inference_mode()
def prefill(setup: DecodeSetup, sequences: Sequence[tuple[int, ...]]) -> tuple:
    """KV cache (a `PrefillKV` under the fast decoder, else a `DynamicCache`), last logits `(B, V)` float32, attention
    mask `(B, W)` and last positions `(B,)` of `sequences` (left-padded to the longest, W).

    A sequence that several rows share (a GRPO group's samples) runs through the model once; its cache and logits
    are then copied to each of its rows, which is what a forward over the repeated rows would compute."""
    distinct: dict[tuple[int, ...], int] = {}
    source = [distinct.setdefault(tuple(sequence), len(distinct)) for sequence in sequences]
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
    if len(prompts) < len(sequences):
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
