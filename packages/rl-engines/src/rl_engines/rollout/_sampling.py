"""Per-row token choice for a batch whose rows have their own temperature, top-k, top-p and seed.

Log-probs are those of the distribution the token was drawn from *before* truncation: `log_softmax(
logits / temperature)` for sampled rows and `log_softmax(logits)` for greedy rows (temperature 0). This
is what a trainer recomputes with a full forward at the same temperature; top-k / top-p only decide which
tokens may be drawn.

Seeds: a row with a seed draws from its own `torch.Generator`, one draw per step, so its draws do not
depend on which other requests share the batch. Rows without a seed share the engine's generator and are
drawn together. What a seeded row draws still depends on its logits, which equal the unbatched ones only
up to floating-point reduction order (padding changes matmul shapes), so two runs with different batch
compositions agree except where a draw lands within ~1e-6 of a probability boundary.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_engines.rollout._types import SamplingParams


class BatchSampler:
    """Chooses the next token of every row of a batch; rows can be dropped as they finish (`select`)."""

    def __init__(self, params: Sequence[SamplingParams], device: torch.device, shared: torch.Generator) -> None:
        self._params = list(params)
        self._rows = list(range(len(self._params)))
        self._device = device
        self._shared = shared
        self._generators = {
            i: torch.Generator(device=device).manual_seed(p.seed)
            for i, p in enumerate(self._params)
            if p.seed is not None and not p.greedy
        }
        self._rebuild()

    def _rebuild(self) -> None:
        params = [self._params[i] for i in self._rows]
        self._all_greedy = all(p.greedy for p in params)
        # Greedy rows use temperature 1 so their log-probs are those of the raw logits.
        temps = [p.temperature if not p.greedy else 1.0 for p in params]
        self._temperature = torch.tensor(temps, dtype=torch.float32, device=self._device).unsqueeze(-1)
        self._filter = any((p.top_k != -1 or p.top_p < 1.0) and not p.greedy for p in params)
        self._top_k = torch.tensor([p.top_k for p in params], device=self._device).unsqueeze(-1)
        self._top_p = torch.tensor([p.top_p for p in params], dtype=torch.float32, device=self._device).unsqueeze(-1)
        self._seeded = [(j, self._generators[i]) for j, i in enumerate(self._rows) if i in self._generators]
        self._unseeded = [j for j, i in enumerate(self._rows) if i not in self._generators and not params[j].greedy]

    def select(self, keep: Sequence[int]) -> None:
        """Keep only the current rows at positions `keep` (in that order)."""
        self._rows = [self._rows[j] for j in keep]
        self._rebuild()

    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`logits: (B, V)` for the current rows -> `(tokens (B,) int64, logprobs (B,) float32)`."""
        logits = logits.float()
        if self._all_greedy:
            tokens = logits.argmax(dim=-1)
            return tokens, torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        scaled = logits / self._temperature
        logprobs = torch.log_softmax(scaled, dim=-1)
        probs = torch.softmax(self._truncate(scaled), dim=-1) if self._filter else logprobs.exp()
        tokens = scaled.argmax(dim=-1)
        if self._unseeded:
            rows = torch.tensor(self._unseeded, device=logits.device)
            tokens[rows] = torch.multinomial(probs[rows], 1, generator=self._shared).squeeze(-1)
        for j, generator in self._seeded:
            tokens[j] = torch.multinomial(probs[j], 1, generator=generator).squeeze(-1)
        return tokens, logprobs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def _truncate(self, scaled: torch.Tensor) -> torch.Tensor:
        """Mask to -inf what top-k, then top-p (of the top-k renormalised mass), exclude; row-wise."""
        ordered, order = scaled.sort(dim=-1, descending=True)
        ranks = torch.arange(scaled.shape[-1], device=scaled.device).unsqueeze(0)
        top_k = torch.where(self._top_k < 0, scaled.shape[-1], self._top_k)
        ordered = ordered.masked_fill(ranks >= top_k, float("-inf"))
        probs = torch.softmax(ordered, dim=-1)
        # Drop a token when the mass strictly before it already reaches top_p (the first token always stays).
        ordered = ordered.masked_fill(probs.cumsum(dim=-1) - probs >= self._top_p, float("-inf"))
        return torch.full_like(scaled, float("-inf")).scatter(-1, order, ordered)
