"""OpenVLA's action tokenizer: continuous actions <-> bins <-> the last `n_bins` ids of a vocabulary.

A reproduction of `prismatic/vla/action_tokenizer.py` in torch. Each action dim is first normalised to
`[low, high]` (OpenVLA: `[-1, 1]` from the dataset's q01/q99 quantiles, `normalize`/`unnormalize`), then
`bins = linspace(low, high, n_bins)`; a value's bin is `digitize(clip(v, low, high), bins) - 1` in
`[0, n_bins)` and its token id is `vocab_size - 1 - bin`, so bin 0 is the vocabulary's last id. Decoding
maps a bin to one of the `n_bins - 1` bin centres; the top bin (only the value `high` itself lands there)
has no centre of its own and decodes to the one below it (OpenVLA's `255 -> 254` clip).
"""

from __future__ import annotations

import torch

from rl_engines.vla._errors import VLAError


class ActionTokenizer:
    """Maps continuous actions to OpenVLA's vocab-tail action tokens and back.

    Args:
        n_bins: number of bins per action dim (OpenVLA: 256), >= 2.
        vocab_size: size of the vocabulary whose last `n_bins` ids are the action tokens, >= n_bins.
        low: the normalised action range's lower end.
        high: its upper end, > low.
    """

    def __init__(self, n_bins: int, vocab_size: int, low: float = -1.0, high: float = 1.0) -> None:
        if n_bins < 2:
            raise VLAError(f"ActionTokenizer n_bins must be >= 2, got {n_bins}")
        if vocab_size < n_bins:
            raise VLAError(
                f"ActionTokenizer vocab_size={vocab_size} must be >= n_bins={n_bins}: the action tokens are the "
                "vocabulary's last n_bins ids; pass the model's full vocab_size"
            )
        if not high > low:
            raise VLAError(f"ActionTokenizer needs low < high, got low={low}, high={high}")
        self.n_bins = n_bins
        self.vocab_size = vocab_size
        self.low = float(low)
        self.high = float(high)
        self.bins = _numpy_linspace(self.low, self.high, n_bins)
        self.bin_centers = (self.bins[:-1] + self.bins[1:]) / 2

    @property
    def first_token_id(self) -> int:
        """The smallest action token id (`vocab_size - n_bins`): ids from here to the end are actions."""
        return self.vocab_size - self.n_bins

    def values_to_bins(self, values: torch.Tensor) -> torch.Tensor:
        """`(...)` normalised actions -> `(...)` int64 bins in `[0, n_bins)` (values outside the range are clipped)."""
        clipped = values.to(torch.float64).clamp(self.low, self.high)
        # numpy's digitize(x, bins) (right=False) is searchsorted(bins, x, side="right"), in [1, n_bins].
        return torch.searchsorted(self.bins, clipped.contiguous(), right=True) - 1

    def bins_to_values(self, bins: torch.Tensor) -> torch.Tensor:
        """`(...)` bins -> `(...)` float32 bin centres; the top bin decodes to the centre below it."""
        self._check_bins(bins)
        index = bins.to(torch.int64).clamp(0, self.n_bins - 2)
        return self.bin_centers[index].to(torch.float32)

    def bins_to_tokens(self, bins: torch.Tensor) -> torch.Tensor:
        """`(...)` bins in `[0, n_bins)` -> `(...)` int64 token ids `vocab_size - 1 - bin`."""
        self._check_bins(bins)
        return self.vocab_size - 1 - bins.to(torch.int64)

    def tokens_to_bins(self, token_ids: torch.Tensor) -> torch.Tensor:
        """`(...)` action token ids (the vocabulary's last `n_bins`) -> `(...)` int64 bins."""
        ids = token_ids.to(torch.int64)
        outside = (ids < self.first_token_id) | (ids >= self.vocab_size)
        if bool(outside.any()):
            bad = int(ids[outside][0])
            raise VLAError(
                f"token id {bad} is not an action token: they are [{self.first_token_id}, {self.vocab_size}) "
                f"(the last n_bins={self.n_bins} ids of vocab_size={self.vocab_size}); mask non-action tokens first"
            )
        return self.vocab_size - 1 - ids

    def encode(self, values: torch.Tensor) -> torch.Tensor:
        """`(...)` normalised actions -> `(...)` int64 action token ids."""
        return self.bins_to_tokens(self.values_to_bins(values))

    def decode(self, token_ids: torch.Tensor) -> torch.Tensor:
        """`(...)` action token ids -> `(...)` float32 normalised actions (bin centres)."""
        return self.bins_to_values(self.tokens_to_bins(token_ids))

    def _check_bins(self, bins: torch.Tensor) -> None:
        if bins.is_floating_point():
            raise VLAError(f"action bins must be an integer tensor, got {bins.dtype}")
        if bins.numel() and (int(bins.min()) < 0 or int(bins.max()) >= self.n_bins):
            raise VLAError(f"action bins must lie in [0, {self.n_bins}), found [{int(bins.min())}, {int(bins.max())}]")


def _numpy_linspace(low: float, high: float, num: int) -> torch.Tensor:
    """`numpy.linspace(low, high, num)` bit for bit (`arange * step + low`, last = `high`); torch's linspace rounds
    differently, and a value on a bin edge then lands in the neighbouring bin."""
    step = (high - low) / (num - 1)
    bins = torch.arange(num, dtype=torch.float64) * step + low
    bins[-1] = high
    return bins


def normalize(
    actions: torch.Tensor, q01: torch.Tensor, q99: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """OpenVLA's BOUNDS_Q99 normalisation: `(..., D)` raw actions -> `[-1, 1]` (clipped) where `mask` `(D,)` is
    True (default: every dim); other dims pass through."""
    q01, q99 = q01.to(actions.dtype), q99.to(actions.dtype)
    scaled = (2 * (actions - q01) / (q99 - q01).clamp_min(1e-8) - 1).clamp(-1, 1)
    return scaled if mask is None else torch.where(mask, scaled, actions)


def unnormalize(
    values: torch.Tensor, q01: torch.Tensor, q99: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """OpenVLA's un-normalisation: `(..., D)` values in `[-1, 1]` -> `0.5 * (v + 1) * (q99 - q01) + q01` where
    `mask` `(D,)` is True (default: every dim); other dims (usually the gripper) are kept as they are."""
    q01, q99 = q01.to(values.dtype), q99.to(values.dtype)
    raw = 0.5 * (values + 1) * (q99 - q01) + q01
    return raw if mask is None else torch.where(mask, raw, values)
