"""Teacher-forced scoring of a token sequence with the served model: per-position log-probs and top-k.

Used by the rollout server for SGLang's prompt log-probs (`logprob_start_len`, `top_logprobs_num`): one plain
forward over the sequence, outside the decode batch, so it costs one extra forward per request that asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rl_engines.rollout._hf_generation import DecodeSetup

TopK = tuple[tuple[float, int], ...]
"""`(logprob, token_id)` pairs, the most likely first."""


@dataclass(frozen=True)
class TokenScores:
    """Scores of positions `start .. len(ids) - 1` of a sequence `ids`.

    `logprobs[j]` is the log-prob of `ids[start + j]` given the tokens before it, and `top[j]` the `top_k` most
    likely tokens at that position (empty when `top_k` is 0); both are None at position 0, which has no context.
    """

    start: int
    logprobs: tuple[float | None, ...]
    top: tuple[TopK | None, ...]


def score_tokens(setup: DecodeSetup, ids: Sequence[int], start: int, top_k: int, temperature: float) -> TokenScores:
    """Score `ids` (length L) from position `start` with one forward of `setup.model`: log-probs of
    `log_softmax(logits / temperature)` (raw logits when `temperature` is 0, as the engine's sampled log-probs),
    and the `top_k` most likely tokens per position."""
    if not 0 <= start < len(ids):
        raise ValueError(f"start must be in [0, {len(ids)}), got {start}")
    # Logits at position p - 1 predict the token at p; position 0 has none.
    first = max(start, 1)
    tokens = torch.tensor([list(ids)], dtype=torch.long, device=setup.device)
    with torch.no_grad(), setup.step_lock:
        logits = setup.model(input_ids=tokens).logits[0, first - 1 : len(ids) - 1].float()  # [L - first, V]
    if temperature > 0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    targets = tokens[0, first:].to(logp.device)
    chosen = logp.gather(-1, targets[:, None])[:, 0].tolist()
    lead: tuple[None, ...] = (None,) if start == 0 else ()
    if top_k > 0:
        values, indices = logp.topk(min(top_k, logp.shape[-1]), dim=-1)
        pairs = zip(values.tolist(), indices.tolist(), strict=True)
        top = tuple(tuple(zip(vals, idx, strict=True)) for vals, idx in pairs)
    else:
        top = tuple(() for _ in chosen)
    return TokenScores(start, (*lead, *chosen), (*lead, *top))
