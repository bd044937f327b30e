"""The decode step of `HFEngine`'s loop: one token per row through the model's forward, or through `FastDecoder`."""

from __future__ import annotations

from typing import Protocol

import torch
from transformers import DynamicCache

from rl_engines._kv_cache import cache_arg
from rl_engines.rollout._fast_decode import FastDecoder, KVState


class DecodeStep(Protocol):
    """One token per row of a batch through the model, holding the batch's KV cache."""

    def select(self, index: torch.Tensor) -> None:
        """Keep only the rows at `index: (B',)`."""

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`tokens, positions: (B,)` int64, `mask: (B, W)` (W counts the new token) -> next-token logits `(B, V)`
        float32."""


class ModelStep:
    """Through the model's forward and a transformers `DynamicCache`; `mask` is 0/1, or bool when `boolean_mask`."""

    def __init__(self, model: torch.nn.Module, cache: DynamicCache, boolean_mask: bool) -> None:
        self._model, self._cache, self._boolean_mask = model, cache, boolean_mask
        self._cache_arg = cache_arg(type(model))

    def select(self, index: torch.Tensor) -> None:
        self._cache.batch_select_indices(index)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = self._model(
            input_ids=tokens.unsqueeze(-1),
            attention_mask=mask[:, None, None, :] if self._boolean_mask else mask,
            position_ids=positions.unsqueeze(-1),
            use_cache=True,
            **{self._cache_arg: self._cache},
        )
        return out.logits[:, -1, :].float()


class FastStep:
    """Through `FastDecoder`; `mask` is bool."""

    def __init__(self, decoder: FastDecoder, cache: DynamicCache) -> None:
        self._decoder, self._state = decoder, KVState.from_cache(cache)

    def select(self, index: torch.Tensor) -> None:
        self._state.select(index)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self._decoder.step(self._state, tokens, positions, mask[:, None, None, :]).float()
