"""The decode step of `HFEngine`'s loop: one token per row through the model's forward, or through `FastDecoder`."""

from __future__ import annotations

from typing import Protocol

import torch
from transformers import DynamicCache

from rl_engines._kv_cache import cache_arg
from rl_engines.rollout._fast_decode import FastDecoder, KVState, PrefillKV


class DecodeStep(Protocol):
    """One token per row of a batch through the model; holds the batch's KV cache, attention mask and positions."""

    def select(self, index: torch.Tensor, drop: int = 0) -> None:
        """Keep only the rows at `index: (B',)`; a step that can (`FastStep`) also drops its first `drop` cache
        columns, which no kept row attends."""
        ...

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed `tokens: (B,)` int64 at each row's next position -> next-token logits `(B, V)` float32."""
        ...


class ModelStep:
    """Through the model's forward and a transformers `DynamicCache`. With `boolean_mask` the forward takes a ready
    `(B, 1, 1, W)` boolean mask (`takes_boolean_4d_mask`) and skips building one from the padding mask each step,
    a visible share of a small model's decode step."""

    def __init__(
        self, model: torch.nn.Module, cache: DynamicCache, mask: torch.Tensor, last: torch.Tensor, boolean_mask: bool
    ) -> None:
        """`mask: (B, W)` 0/1 padding mask of the prefill, `last: (B,)` each row's last position."""
        self._model, self._cache, self._boolean_mask = model, cache, boolean_mask
        self._mask = mask.bool() if boolean_mask else mask  # converted once, so each step passes a view
        self._positions = last
        self._cache_arg = cache_arg(type(model))

    def select(self, index: torch.Tensor, drop: int = 0) -> None:
        self._cache.batch_select_indices(index)
        self._mask, self._positions = self._mask[index], self._positions[index]

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        self._mask = torch.cat([self._mask, self._mask.new_ones((len(tokens), 1))], dim=-1)
        self._positions = self._positions + 1
        out = self._model(
            input_ids=tokens.unsqueeze(-1),
            attention_mask=self._mask[:, None, None, :] if self._boolean_mask else self._mask,
            position_ids=self._positions.unsqueeze(-1),
            use_cache=True,
            **{self._cache_arg: self._cache},
        )
        return out.logits[:, -1, :].float()


class SharedRows:
    """Which rows of a batch have had the same history so far: the same prompt, run once by the prefill (its
    `PrefillKV.lineage`), and the same tokens since. Such rows have equal cache rows and take the same input, so
    one of them computes for all (`FastDecoder.step`'s `shared`). The 8 samples of a GRPO group often agree on
    their first tokens (a fine-tuned model's fixed answer format), and a step then computes a fraction of its rows.
    """

    MIN_ROWS = 4
    """The fewest rows a shared step computes, repeating one when fewer are distinct: CPU GEMMs of under 4 rows
    take another kernel whose rounding differs, and a row's logits should not depend on its batch's sharing."""

    def __init__(self, lineage: torch.Tensor, vocab: int) -> None:
        """`lineage: (B,)` int64, equal for rows with equal histories; `vocab`: above every token id."""
        self.lineage, self._vocab = lineage, vocab

    def select(self, index: torch.Tensor) -> None:
        """Keep only the rows at `index: (B',)`."""
        self.lineage = self.lineage[index]

    def extend(self, lineage: torch.Tensor) -> None:
        """Append rows (a prefill's `lineage`), sharing nothing with the rows already here."""
        offset = int(self.lineage.max()) + 1 if len(self.lineage) else 0
        self.lineage = torch.cat([self.lineage, lineage + offset])

    def advance(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Take `tokens: (B,)` as every row's next input; returns `(source, inverse)` for `FastDecoder.step` (the
        rows that compute, at least `MIN_ROWS`, and which of them each row takes), or None when every row is
        distinct (or the batch is too small to share)."""
        rows = len(tokens)
        distinct, inverse = torch.unique(self.lineage * self._vocab + tokens, return_inverse=True)
        self.lineage = inverse
        if rows < self.MIN_ROWS or len(distinct) == rows:
            return None
        count = max(len(distinct), self.MIN_ROWS)
        source = inverse.new_full((count,), rows).scatter_reduce_(
            0, inverse, torch.arange(rows, device=inverse.device), "amin"
        )
        if count > len(distinct):  # computing a row twice changes nothing, and keeps the GEMMs on one kernel
            source[len(distinct) :] = source[0]
        return source, inverse


class FastStep:
    """Through `FastDecoder`, on a `KVState` taken over from its prefill; rows with equal histories compute once
    (`SharedRows`)."""

    def __init__(
        self, decoder: FastDecoder, cache: PrefillKV, mask: torch.Tensor, last: torch.Tensor, capacity: int
    ) -> None:
        """`mask` and `last` as for `ModelStep`; `capacity`: the most columns (prompt and decode) a row can fill."""
        self._decoder, self._state, self._positions = decoder, KVState(cache, mask, capacity), last
        self._shared = SharedRows(cache.lineage, decoder.vocab)

    @property
    def width(self) -> int:
        """Cache columns filled so far (every row writes the same column each step)."""
        return self._state.width

    def select(self, index: torch.Tensor, drop: int = 0) -> None:
        self._state.select(index, drop)
        self._positions = self._positions[index]
        self._shared.select(index)

    def extend(self, cache: PrefillKV, mask: torch.Tensor, last: torch.Tensor, capacity: int) -> int:
        """Add the rows of a prefill (`mask: (n, W)`, `last: (n,)` as for the constructor) between steps; `capacity`
        bounds the columns any row can now fill. Returns by how many columns the existing rows moved right."""
        shift = self._state.extend(cache, mask)
        self._state.capacity = max(self._state.capacity, capacity)
        self._positions = torch.cat([self._positions, last])
        self._shared.extend(cache.lineage)
        return shift

    def set_capacity(self, capacity: int) -> None:
        """Bound the columns any row can fill from now on."""
        self._state.capacity = capacity

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        self._positions = self._positions + 1
        shared = self._shared.advance(tokens)
        if shared is None:
            return self._decoder.step(self._state, tokens, self._positions).float()
        source, inverse = shared
        inputs = tokens.index_select(0, source), self._positions.index_select(0, source)
        return self._decoder.step(self._state, *inputs, shared).float().index_select(0, inverse)
