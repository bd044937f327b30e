"""Per-row token choice for a batch whose rows have their own temperature, top-k, top-p and seed.

Log-probs are those of the distribution the token was drawn from *before* truncation: `log_softmax(
logits / temperature)` for sampled rows and `log_softmax(logits)` for greedy rows (temperature 0). This
is what a trainer recomputes with a full forward at the same temperature; top-k / top-p only decide which
tokens may be drawn.

Drawing is one inverse-CDF search over the whole batch per step, fed one uniform number per sampled row.
Seeds: a row with a seed takes its uniforms from its own `torch.Generator`, UNIFORM_BLOCK at a time, counted from
the step it joined the batch, so its draws do not depend on which other requests share the batch or when it
joined. Rows without a seed share the engine's
generator, which draws their uniforms together each step. What a seeded row draws still depends on its
logits, which equal the unbatched ones only up to floating-point reduction order (padding changes matmul
shapes), so two runs with different batch compositions agree except where a draw lands within ~1e-6 of a
probability boundary.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_engines.rollout._types import SamplingParams

UNIFORM_BLOCK = 64
"""Uniforms a seeded row draws from its generator at once: one generator call per row every 64 tokens, instead
of one per row per token (which dominated sampling time for batches of short completions)."""


class BatchSampler:
    """Chooses the next token of every row of a batch; rows can leave as they finish (`select`) and join between
    steps (`extend`). A seeded row's k-th token takes its generator's k-th uniform whenever it joined."""

    def __init__(self, params: Sequence[SamplingParams], device: torch.device, shared: torch.Generator) -> None:
        self._device = device
        self._shared = shared
        self._step = 0
        self._generators: list[torch.Generator | None] = []
        self._joined: list[int] = []
        self._greedy: list[bool] = []
        self._filtered: list[bool] = []
        self._unit: list[bool] = []
        self._uniforms = torch.zeros(0, UNIFORM_BLOCK, device=device)
        self._temperature = torch.zeros(0, 1, dtype=torch.float32, device=device)
        self._top_k = torch.zeros(0, 1, dtype=torch.long, device=device)
        self._top_p = torch.zeros(0, 1, dtype=torch.float32, device=device)
        self.extend(params)

    def _rebuild(self) -> None:
        """The batch-wide flags and row lists, from the per-row ones (the per-row tensors are indexed or appended
        to as rows leave or join, not rebuilt)."""
        self._all_greedy = all(self._greedy)
        self._filter = any(self._filtered)
        self._unit_temperature = all(self._unit)
        generators = self._generators
        seeded = [j for j, g in enumerate(generators) if g is not None]
        self._seeded = seeded
        self._seeded_rows = torch.tensor(seeded, dtype=torch.long, device=self._device)
        self._seeded_joined = torch.tensor([self._joined[j] for j in seeded], dtype=torch.long, device=self._device)
        pairs = enumerate(zip(generators, self._greedy, strict=True))
        unseeded = [j for j, (g, greedy) in pairs if g is None and not greedy]
        self._unseeded_rows = torch.tensor(unseeded, dtype=torch.long, device=self._device)
        self._sampled_rows = torch.cat([self._seeded_rows, self._unseeded_rows])
        # The common batch (every row sampled, all seeded or all not) gets its uniforms already in row order.
        self._in_row_order = seeded + unseeded == list(range(len(generators)))

    @property
    def order_free(self) -> bool:
        """No row draws from the engine's shared generator, so the rows' order changes no row's tokens."""
        return not self._unseeded_rows.numel()

    def select(self, keep: Sequence[int], index: torch.Tensor | None = None) -> None:
        """Keep only the current rows at positions `keep` (in that order); `index`: `keep` as a tensor, if made."""
        if index is None:
            index = torch.tensor(list(keep), dtype=torch.long, device=self._device)
        self._generators = [self._generators[j] for j in keep]
        self._joined = [self._joined[j] for j in keep]
        self._greedy = [self._greedy[j] for j in keep]
        self._filtered = [self._filtered[j] for j in keep]
        self._unit = [self._unit[j] for j in keep]
        self._uniforms = self._uniforms[index]
        self._temperature = self._temperature[index]
        self._top_k = self._top_k[index]
        self._top_p = self._top_p[index]
        self._rebuild()

    def extend(self, params: Sequence[SamplingParams]) -> None:
        """Append rows sampled with `params`; their first token is the next call's."""
        params = list(params)
        self._generators += [
            torch.Generator(device=self._device).manual_seed(p.seed) if p.seed is not None and not p.greedy else None
            for p in params
        ]
        self._joined += [self._step] * len(params)
        self._greedy += [p.greedy for p in params]
        self._filtered += [(p.top_k != -1 or p.top_p < 1.0) and not p.greedy for p in params]
        # Greedy rows use temperature 1 so their log-probs are those of the raw logits.
        temps = [p.temperature if not p.greedy else 1.0 for p in params]
        self._unit += [t == 1.0 for t in temps]
        device = self._device
        fresh = torch.zeros(len(params), UNIFORM_BLOCK, device=device)
        self._uniforms = torch.cat([self._uniforms, fresh]) if len(self._uniforms) else fresh
        temperature = torch.tensor(temps, dtype=torch.float32, device=device).unsqueeze(-1)
        top_k = torch.tensor([p.top_k for p in params], dtype=torch.long, device=device).unsqueeze(-1)
        top_p = torch.tensor([p.top_p for p in params], dtype=torch.float32, device=device).unsqueeze(-1)
        self._temperature = torch.cat([self._temperature, temperature])
        self._top_k = torch.cat([self._top_k, top_k])
        self._top_p = torch.cat([self._top_p, top_p])
        self._rebuild()

    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`logits: (B, V)` for the current rows -> `(tokens (B,) int64, logprobs (B,) float32)`."""
        logits = logits.float()
        if self._all_greedy:
            self._step += 1
            tokens = logits.argmax(dim=-1)
            return tokens, torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        scaled = logits if self._unit_temperature else logits / self._temperature
        logprobs = torch.log_softmax(scaled, dim=-1)
        probs = torch.softmax(self._truncate(scaled), dim=-1) if self._filter else logprobs.exp()
        uniforms = self._next_uniforms()
        if self._in_row_order:
            tokens = _inverse_cdf(probs, uniforms)
        else:
            tokens = scaled.argmax(dim=-1)
            if uniforms.numel():
                tokens[self._sampled_rows] = _inverse_cdf(probs[self._sampled_rows], uniforms)
        return tokens, logprobs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def _next_uniforms(self) -> torch.Tensor:
        """One uniform in [0, 1) for each sampled row `(S,)`, in `_sampled_rows` order: seeded rows, then the rest."""
        step = self._step
        self._step += 1
        for j in self._seeded:
            if (step - self._joined[j]) % UNIFORM_BLOCK == 0:
                generator = self._generators[j]
                self._uniforms[j] = torch.rand(UNIFORM_BLOCK, generator=generator, device=self._device)
        if self._seeded:
            seeded = self._uniforms[self._seeded_rows, (step - self._seeded_joined) % UNIFORM_BLOCK]
        else:
            seeded = self._uniforms.new_zeros(0)
        if not self._unseeded_rows.numel():
            return seeded
        shared = torch.rand(len(self._unseeded_rows), generator=self._shared, device=self._device)
        return torch.cat([seeded, shared]) if seeded.numel() else shared

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


def _inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """`probs: (S, V)` rows of non-negative mass, `uniforms: (S,)` in [0, 1) -> the token each draws, `(S,)`.

    Token t is drawn when u * total falls in [cdf[t-1], cdf[t]): never a token of zero mass."""
    cdf = probs.cumsum(dim=-1)
    targets = uniforms.unsqueeze(-1) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, targets, right=True).squeeze(-1)
    # A float32 u < 1 keeps u * total below total, but a uniform of 1 would search past the end, where the last
    # token with mass is the answer. Finding that token only then saves a fifth of a step's sampling time; the
    # check's host sync costs nothing extra, as the decode loop reads the tokens right after.
    overflow = tokens == probs.shape[-1]
    if overflow.any():
        last_with_mass = probs.shape[-1] - 1 - (probs > 0).flip(-1).int().argmax(dim=-1)
        tokens = torch.where(overflow, last_with_mass, tokens)
    return tokens
