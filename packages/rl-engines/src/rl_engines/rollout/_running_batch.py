"""The decode state of `HFEngine`'s scheduler: the rows now decoding, which join and leave between steps.

A row's sampled tokens and log-probs go into `(B, T)` buffers one column per step (a step costs a few tensor ops,
not Python work per row); column c holds global step `base + c`, so a row that joined at step j has its k-th
token in column `j + k - base`. When rows leave, columns no remaining row uses are dropped, in the buffers as in
the KV cache (`FastStep.select(drop=...)`), so a batch that never empties does not grow without bound. The weight
version of every step is logged once per change; a row's `version_spans` come from that log.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from rl_engines.rollout._decode_step import DecodeStep, FastStep
from rl_engines.rollout._sampling import BatchSampler
from rl_engines.rollout._types import FinishReason, GenerateOutput, GenerateRequest, TokenCallback, VersionSpan

INITIAL_STEPS = 64
"""Token-buffer columns allocated at first; they double when full."""


@dataclass(eq=False)
class Entry:
    """One submitted request and what the scheduler knows of it."""

    request: GenerateRequest
    on_tokens: TokenCallback | None
    future: concurrent.futures.Future[GenerateOutput]
    budget: int
    """New tokens it may make: `max_new_tokens`, cut to what the context leaves."""
    joined: int = 0
    """The batch step at which it sampled its first token."""
    kv_start: int = 0
    """The first KV-cache column it attends."""
    finish: FinishReason | None = None


@dataclass
class VersionLog:
    """The weight version of every batch step, as `(first step, version)` at each change."""

    changes: list[tuple[int, int]] = field(default_factory=list)

    def record(self, step: int, version: int) -> None:
        """Step `step` sampled from logits of weights `version`."""
        if not self.changes or self.changes[-1][1] != version:
            self.changes.append((step, version))

    def spans(self, first: int, count: int) -> tuple[VersionSpan, ...]:
        """The spans of a row's `count` tokens sampled at steps `first, first + 1, ...`."""
        spans: list[VersionSpan] = []
        for i, (step, version) in enumerate(self.changes):
            end_step = self.changes[i + 1][0] if i + 1 < len(self.changes) else first + count
            lo, hi = max(step, first), min(end_step, first + count)
            if hi > lo:
                spans.append(VersionSpan(version, lo - first, hi - first))
        return tuple(spans)


class RunningBatch:
    """The rows decoding now: their decode step (KV cache), sampler, token buffers and stop rules."""

    def __init__(self, step: DecodeStep, sampler: BatchSampler, device: torch.device, eos_ids: frozenset[int]) -> None:
        self.step = step
        self.sampler = sampler
        self.device = device
        self.eos_ids = eos_ids
        self.entries: list[Entry] = []
        self.steps = 0
        """Tokens sampled so far by the batch (its clock)."""
        self.base = 0
        self.log = VersionLog()
        self._tokens = torch.zeros((0, INITIAL_STEPS), dtype=torch.long, device=device)
        self._logprobs = torch.zeros((0, INITIAL_STEPS), dtype=torch.float32, device=device)
        self._rebuild()

    def __len__(self) -> int:
        return len(self.entries)

    def _stops(self, entries: Sequence[Entry]) -> list[list[int]]:
        """Each entry's stop ids, sorted."""
        return [
            sorted({*e.request.sampling.stop_token_ids, *(() if e.request.sampling.ignore_eos else self.eos_ids)})
            for e in entries
        ]

    @staticmethod
    def _table(stops: list[list[int]], width: int) -> torch.Tensor:
        """`stops` as a `(len(stops), width)` table padded with -1 (token ids are >= 0: -1 matches none)."""
        return torch.tensor([ids + [-1] * (width - len(ids)) for ids in stops], dtype=torch.long).view(-1, width)

    def _rebuild(self) -> None:
        """Per-row tensors after rows joined or left."""
        stops = self._stops(self.entries)
        width = max([1, *(len(ids) for ids in stops)])
        self._stop_ids = self._table(stops, width).to(self.device)
        shared = set(map(tuple, stops))
        self._shared_stop_list = stops[0] if len(shared) == 1 else None
        self._shared_stops = None
        if self._shared_stop_list is not None:
            self._shared_stops = torch.tensor(self._shared_stop_list, dtype=torch.long, device=self.device)
        ends = [e.joined + e.budget for e in self.entries]
        self._ends = torch.tensor(ends, dtype=torch.long, device=self.device)
        self._first_end = min(ends, default=0)
        self.has_callbacks = any(e.on_tokens is not None for e in self.entries)

    def _append_rows(self, entries: Sequence[Entry]) -> None:
        """The per-row tensors of `_rebuild` with `entries` appended to the rows there are: only their rows are
        built (a batch that runs continuously has rows joining at most steps). Same stops and budgets."""
        stops = self._stops(entries)
        width = max([self._stop_ids.shape[1], *(len(ids) for ids in stops)])
        table = self._stop_ids
        if width > table.shape[1]:
            table = torch.cat([table, table.new_full((table.shape[0], width - table.shape[1]), -1)], dim=1)
        self._stop_ids = torch.cat([table, self._table(stops, width).to(self.device)])
        if self._shared_stop_list is not None and any(ids != self._shared_stop_list for ids in stops):
            self._shared_stop_list, self._shared_stops = None, None
        ends = [e.joined + e.budget for e in entries]
        self._ends = torch.cat([self._ends, torch.tensor(ends, dtype=torch.long, device=self.device)])
        self._first_end = min(self._first_end, *ends)
        self.has_callbacks = self.has_callbacks or any(e.on_tokens is not None for e in entries)

    def add(self, entries: Sequence[Entry]) -> None:
        """Rows that sample their first token at the next `record` (their KV is already in `step`)."""
        for entry in entries:
            entry.joined = self.steps
        had_rows = bool(self.entries)
        self.entries += entries
        fresh = self._tokens.new_zeros((len(entries), self._tokens.shape[1]))
        self._tokens = torch.cat([self._tokens, fresh])
        self._logprobs = torch.cat([self._logprobs, fresh.float()])
        if had_rows and entries:
            self._append_rows(entries)
        else:
            self._rebuild()

    def record(self, tokens: torch.Tensor, logprobs: torch.Tensor, version: int) -> list[tuple[int, bool]]:
        """Store one step's `tokens, logprobs: (B,)` sampled from weights `version`; returns `(row, stopped)` for each
        row that finished (on a stop token, else on its budget)."""
        column = self.steps - self.base
        if column == self._tokens.shape[1]:
            self._tokens = torch.cat([self._tokens, torch.zeros_like(self._tokens)], dim=1)
            self._logprobs = torch.cat([self._logprobs, torch.zeros_like(self._logprobs)], dim=1)
        self._tokens[:, column] = tokens
        self._logprobs[:, column] = logprobs
        self.log.record(self.steps, version)
        self.steps += 1
        if self._shared_stops is not None:  # every row stops on the same ids (one sampling setting): one op
            stopped = torch.isin(tokens, self._shared_stops)
        else:
            stopped = (tokens[:, None] == self._stop_ids).any(dim=1)
        if self.steps < self._first_end:  # no row has reached its budget yet
            if not bool(stopped.any()):
                return []
            done = stopped
        else:
            done = stopped | (self._ends <= self.steps)
        rows = done.nonzero().flatten().tolist()
        return list(zip(rows, stopped[done].tolist(), strict=True)) if rows else []

    def callbacks(self, tokens: torch.Tensor, logprobs: torch.Tensor) -> None:
        """Hand this step's tokens to the rows' `on_tokens`."""
        for entry, token, logprob in zip(self.entries, tokens.tolist(), logprobs.tolist(), strict=True):
            if entry.on_tokens is not None:
                entry.on_tokens([(entry.request.rid, token, logprob)])

    def sequence(self, row: int) -> list[int]:
        """Prompt and tokens so far of `row`."""
        entry = self.entries[row]
        first = entry.joined - self.base
        return [*entry.request.input_ids, *self._tokens[row, first : self.steps - self.base].tolist()]

    def output(self, row: int, fallback_version: int) -> GenerateOutput:
        """The output of `row` as it stands (its `finish` set, or "abort")."""
        entry = self.entries[row]
        first, count = entry.joined - self.base, self.steps - entry.joined
        tokens = tuple(self._tokens[row, first : first + count].tolist())
        logprobs = tuple(self._logprobs[row, first : first + count].tolist())
        spans = self.log.spans(entry.joined, count)
        return GenerateOutput(
            rid=entry.request.rid,
            output_ids=tokens,
            output_logprobs=logprobs if entry.request.return_logprobs else None,
            finish_reason=entry.finish or "abort",
            weight_version=spans[-1].version if spans else fallback_version,
            prompt_len=len(entry.request.input_ids),
            version_spans=spans,
        )

    def compaction_order(self, keep: list[int], done: list[int]) -> list[int]:
        """The order to keep the rows at `keep` in, when the rows at `done` leave (both ascending): each position a
        leaving row frees before the last kept one takes one of the last kept rows, so the cache (`KVState.select`)
        copies those rows only. Only when no output depends on the rows' order (the fast decoder's cache, no row
        drawing from the engine's shared generator, which draws in row order); else `keep` as it is."""
        count = len(keep)
        holes = [row for row in done if row < count]
        if not holes or not isinstance(self.step, FastStep) or not self.sampler.order_free:
            return keep
        order = list(range(count))
        for hole, row in zip(holes, reversed(keep[count - len(holes) :]), strict=True):
            order[hole] = row
        return order

    def keep(self, rows: Sequence[int], tokens: torch.Tensor) -> torch.Tensor:
        """Keep only `rows` (in order), dropping columns none of them uses; returns their slice of `tokens: (B,)`."""
        self.entries = [self.entries[j] for j in rows]
        index = torch.tensor(list(rows), dtype=torch.long, device=self.device)
        drop_kv = min((e.kv_start for e in self.entries), default=0) if isinstance(self.step, FastStep) else 0
        if drop_kv:
            for entry in self.entries:
                entry.kv_start -= drop_kv
        self.step.select(index, drop_kv)
        self.sampler.select(rows, index)
        drop = min((e.joined for e in self.entries), default=self.steps) - self.base
        self._tokens = self._tokens[index, drop:]
        self._logprobs = self._logprobs[index, drop:]
        self.base += drop
        self._keep_rows(index)
        return tokens[index]

    def _keep_rows(self, index: torch.Tensor) -> None:
        """The per-row tensors of `_rebuild` for the rows at `index`, taken from the current ones rather than rebuilt
        row by row (a batch retires rows at most decode steps). A batch whose rows shared their stop ids still does;
        one that did not keeps the per-row table, which gives the same stops."""
        self._stop_ids = self._stop_ids[index]
        self._ends = self._ends[index]
        self._first_end = int(self._ends.min()) if len(self.entries) else 0
        self.has_callbacks = self.has_callbacks and any(e.on_tokens is not None for e in self.entries)
