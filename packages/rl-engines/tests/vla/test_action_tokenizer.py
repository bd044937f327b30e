"""ActionTokenizer against OpenVLA's numpy reference: round trips, the 255 -> 254 clip, quantile (un)normalisation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_engines.vla import ActionTokenizer, VLAError, normalize, unnormalize

VOCAB = 32000


def _openvla_encode(action: np.ndarray, n_bins: int, vocab_size: int) -> np.ndarray:
    """prismatic/vla/action_tokenizer.py, __call__ (without the string decode)."""
    bins = np.linspace(-1, 1, n_bins)
    action = np.clip(action, a_min=-1.0, a_max=1.0)
    discretized = np.digitize(action, bins)
    return vocab_size - discretized


def _openvla_decode(token_ids: np.ndarray, n_bins: int, vocab_size: int) -> np.ndarray:
    """prismatic/vla/action_tokenizer.py, decode_token_ids_to_actions."""
    bins = np.linspace(-1, 1, n_bins)
    bin_centers = (bins[:-1] + bins[1:]) / 2.0
    discretized = vocab_size - token_ids
    discretized = np.clip(discretized - 1, a_min=0, a_max=bin_centers.shape[0] - 1)
    return bin_centers[discretized]


actions = st.lists(st.floats(-1.5, 1.5, allow_nan=False, width=32), min_size=1, max_size=16)


@settings(max_examples=200, deadline=None)
@given(values=actions, n_bins=st.sampled_from([2, 3, 7, 256]))
def test_encode_and_decode_match_openvla(values: list[float], n_bins: int) -> None:
    tokenizer = ActionTokenizer(n_bins, VOCAB)
    array = np.asarray(values, dtype=np.float64)
    tokens = tokenizer.encode(torch.tensor(array))
    np.testing.assert_array_equal(tokens.numpy(), _openvla_encode(array, n_bins, VOCAB))
    decoded = tokenizer.decode(tokens)
    np.testing.assert_allclose(decoded.numpy(), _openvla_decode(tokens.numpy(), n_bins, VOCAB), rtol=0, atol=1e-7)


@settings(max_examples=200, deadline=None)
@given(values=actions)
def test_decode_lands_within_one_bin_of_the_clipped_value(values: list[float]) -> None:
    tokenizer = ActionTokenizer(256, VOCAB)
    x = torch.tensor(values, dtype=torch.float64)
    decoded = tokenizer.decode(tokenizer.encode(x)).double()
    width = 2 / 255
    assert torch.all((decoded - x.clamp(-1, 1)).abs() <= width + 1e-6)


@settings(max_examples=100, deadline=None)
@given(bins=st.lists(st.integers(0, 254), min_size=1, max_size=16))
def test_bins_round_trip_through_tokens_and_values(bins: list[int]) -> None:
    tokenizer = ActionTokenizer(256, VOCAB)
    b = torch.tensor(bins)
    tokens = tokenizer.bins_to_tokens(b)
    assert torch.all(tokens >= VOCAB - 256) and torch.all(tokens < VOCAB)
    assert torch.equal(tokenizer.tokens_to_bins(tokens), b)
    # Every bin below the top one is a centre's bin: decoding then encoding returns it.
    assert torch.equal(tokenizer.values_to_bins(tokenizer.bins_to_values(b)), b)


def test_the_top_bin_decodes_to_the_centre_below_it() -> None:
    tokenizer = ActionTokenizer(256, VOCAB)
    top = tokenizer.encode(torch.tensor([1.0]))
    assert int(tokenizer.tokens_to_bins(top)) == 255
    assert int(top) == VOCAB - 256  # the first action id: OpenVLA's digitize gives 256 there
    assert torch.equal(tokenizer.decode(top), tokenizer.decode(tokenizer.bins_to_tokens(torch.tensor([254]))))
    assert float(tokenizer.decode(top)) == pytest.approx(float(tokenizer.bin_centers[254]))


def test_bin_zero_is_the_last_vocabulary_id() -> None:
    tokenizer = ActionTokenizer(256, VOCAB)
    assert int(tokenizer.encode(torch.tensor([-1.0]))) == VOCAB - 1
    assert tokenizer.first_token_id == VOCAB - 256


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(-1, 1, allow_nan=False), min_size=3, max_size=3))
def test_quantile_unnormalize_inverts_normalize(values: list[float]) -> None:
    q01 = torch.tensor([-0.5, 0.0, 2.0], dtype=torch.float64)
    q99 = torch.tensor([0.5, 3.0, 6.0], dtype=torch.float64)
    v = torch.tensor(values, dtype=torch.float64)
    raw = unnormalize(v, q01, q99)
    torch.testing.assert_close(raw, 0.5 * (v + 1) * (q99 - q01) + q01)
    torch.testing.assert_close(normalize(raw, q01, q99), v)


def test_unnormalize_keeps_unmasked_dims() -> None:
    v = torch.tensor([0.0, 1.0])
    out = unnormalize(v, torch.tensor([0.0, 0.0]), torch.tensor([10.0, 10.0]), mask=torch.tensor([True, False]))
    assert out.tolist() == [5.0, 1.0]


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(VLAError, match="vocab_size=10 must be >= n_bins=256"):
        ActionTokenizer(256, 10)
    tokenizer = ActionTokenizer(256, VOCAB)
    with pytest.raises(VLAError, match="not an action token"):
        tokenizer.tokens_to_bins(torch.tensor([5]))
    with pytest.raises(VLAError, match=r"must lie in \[0, 256\)"):
        tokenizer.bins_to_tokens(torch.tensor([256]))
