"""The batched decoding loop of `HFEngine`: left-padded prefill, KV-cached decode, per-row stopping.

Positions follow `transformers` `generate` (cumulative attention mask minus one), so greedy output equals
`model.generate` up to floating-point reduction order. Finished rows are dropped from the batch (and the
KV cache) at once. Between steps the loop asks the engine's gate whether to abort or park.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
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


class _Steps:
    """A batch's sampled tokens, kept as one tensor per decode step until the batch ends, so that a step costs a
    few tensor ops rather than Python work per row.

    Every row starts at step 0 and stays in the batch until it finishes, so row `i`'s k-th token is the one step k
    sampled for it. A row finishes on one of its stop tokens (its `stop_token_ids`, and the engine's eos ids unless
    `ignore_eos`), then on reaching its budget of new tokens."""

    def __init__(self, rows: Sequence[_Row], setup: DecodeSetup) -> None:
        stops = [
            sorted({*r.request.sampling.stop_token_ids, *(() if r.request.sampling.ignore_eos else setup.eos_ids)})
            for r in rows
        ]
        width = max([1, *(len(ids) for ids in stops)])
        table = torch.full((len(rows), width), -1, dtype=torch.long)  # token ids are >= 0: -1 matches none
        for i, ids in enumerate(stops):
            table[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        self._stop_ids = table.to(setup.device)
        shared = set(map(tuple, stops))
        self._shared_stops = torch.tensor(stops[0], dtype=torch.long, device=setup.device) if len(shared) == 1 else None
        self._budgets = torch.tensor([r.budget for r in rows], device=setup.device)
        self._first_budget = min((r.budget for r in rows), default=0)
        self._steps: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._versions: list[int] = []

    def add(
        self, rows: torch.Tensor, tokens: torch.Tensor, logprobs: torch.Tensor, version: int
    ) -> list[tuple[int, bool]]:
        """Record one step's `tokens, logprobs: (A,)` of the rows `rows: (A,)`, sampled with weights `version`;
        returns `(j, stopped)` for each position j of `rows` whose row finished (on a stop token, else on its
        budget)."""
        length = len(self._steps) + 1
        self._steps.append((rows, tokens, logprobs))
        self._versions.append(version)
        if self._shared_stops is not None:  # every row stops on the same ids (one sampling setting): one op
            stopped = torch.isin(tokens, self._shared_stops)
        else:
            stopped = (tokens[:, None] == self._stop_ids[rows]).any(dim=1)
        if length < self._first_budget:  # no row has reached its budget yet
            if not bool(stopped.any()):
                return []
            done = stopped
        else:
            done = stopped | (self._budgets[rows] <= length)
        positions = done.nonzero().flatten().tolist()
        return list(zip(positions, stopped[done].tolist(), strict=True)) if positions else []

    def write(self, rows: Sequence[_Row]) -> None:
        """Set every row's tokens, log-probs and versions from the recorded steps."""
        if not self._steps:
            return
        index = torch.cat([step[0] for step in self._steps])
        sizes = torch.tensor([len(step[0]) for step in self._steps], device=index.device)
        column = torch.repeat_interleave(torch.arange(len(self._steps), device=index.device), sizes)
        tokens = torch.zeros((len(rows), len(self._steps)), dtype=self._steps[0][1].dtype, device=index.device)
        logprobs = torch.zeros((len(rows), len(self._steps)), dtype=self._steps[0][2].dtype, device=index.device)
        tokens[index, column] = torch.cat([step[1] for step in self._steps])
        logprobs[index, column] = torch.cat([step[2] for step in self._steps])
        counts = torch.bincount(index, minlength=len(rows)).tolist()
        for row, count, row_tokens, row_logprobs in zip(rows, counts, tokens.tolist(), logprobs.tolist(), strict=True):
            row.tokens = row_tokens[:count]
            row.logprobs = row_logprobs[:count]
            row.versions = self._versions[:count]


def _mark_aborted(rows: Sequence[_Row], indices: Iterable[int], aborted: frozenset[str] | None) -> bool:
    """Finish as "abort" the unfinished rows among `indices` that the gate's `aborted` names (None: all); returns
    whether the gate named any."""
    if aborted is not None and not aborted:
        return False
    for i in indices:
        if rows[i].finish is None and (aborted is None or rows[i].request.rid in aborted):
            rows[i].finish = "abort"
    return True


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
    _mark_aborted(rows, range(len(rows)), gate.checkpoint(ticket))
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
    steps = _Steps(rows, setup)
    rows_index = torch.tensor(active, dtype=torch.long, device=setup.device)
    while active:
        tokens, logprobs = sampler(logits)
        finished = steps.add(rows_index, tokens, logprobs, version)
        for j, stopped in finished:
            rows[active[j]].finish = "stop" if stopped else "length"
        if on_tokens is not None:
            rids = [rows[i].request.rid for i in active]
            on_tokens(list(zip(rids, tokens.tolist(), logprobs.tolist(), strict=True)))
        if _mark_aborted(rows, active, gate.checkpoint(ticket)) or finished:
            keep = [j for j, i in enumerate(active) if rows[i].finish is None]
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=setup.device)
                step.select(index)
                tokens = tokens[index]
                rows_index = rows_index[index]
                sampler.select(keep)
                active = [active[j] for j in keep]
        with setup.step_lock:
            version = gate.version
            logits = step(tokens)
    steps.write(rows)
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
