"""The ddp normaliser's counts riding on the gradient all-reduce give the separate all-gather's gradients, step,
losses, metrics and normaliser to float rounding, for every aggregation mode, with ranks of different token counts
and widths; and the path that is not asked for (a plain loss function) keeps the separate collective."""

from __future__ import annotations

import pytest
import torch
from _deferred_norm_workers import MODES, deferred_norm_scenario
from _training_helpers import run_distributed

from rl_core.losses import LossNormalizer
from rl_core.objectives import PolicyObjective, ValueObjective
from rl_engines.training import BatchError, NormalizedLoss
from rl_engines.training._deferred_norm import PROVISIONAL, DeferredCounts, deferrable

pytestmark = pytest.mark.slow

RTOL = 1e-6
"""Relative to each tensor's largest entry too (`_close`): an entry near 0 is a sum that cancelled, whose float32
rounding is relative to its terms, not to itself."""
STEPS = ("result", "second")


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=RTOL, atol=RTOL * float(want.abs().max()))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("deferred")
    run_distributed(deferred_norm_scenario, out)
    return [torch.load(out / f"deferred_rank{rank}.pt", weights_only=False) for rank in range(2)]


@pytest.mark.parametrize("mode", MODES)
def test_deferred_counts_give_the_separate_collectives_gradients_and_step(ranks: list[dict], mode: str) -> None:
    for rank in ranks:
        separate, deferred = rank[mode]["separate"], rank[mode]["deferred"]
        assert separate["gradients"].keys() == deferred["gradients"].keys()
        for name, grad in separate["gradients"].items():
            assert grad.abs().max() > 0, name
            _close(deferred["gradients"][name], grad)
        for name, weight in separate["weights"].items():
            _close(deferred["weights"][name], weight)
        for step in STEPS:
            want, got = separate[step], deferred[step]
            assert got.normalizer == want.normalizer
            assert got.loss == pytest.approx(want.loss, rel=RTOL)
            assert got.grad_norm == pytest.approx(want.grad_norm, rel=RTOL)
            assert got.skipped == want.skipped is False
            assert got.metrics.keys() == want.metrics.keys() and want.metrics
            for name, value in want.metrics.items():
                assert got.metrics[name] == pytest.approx(value, rel=RTOL), name


def test_the_ranks_differ_and_the_horizon_is_the_widest(ranks: list[dict]) -> None:
    normalizer = ranks[0][MODES[0]]["separate"]["result"].normalizer
    # Rank 0: 5 rows of width 16; rank 1: 3 rows of width 13 (see uneven_rows).
    assert normalizer.num_sequences == 8 and normalizer.horizon == 16
    for mode in MODES:
        assert ranks[0][mode]["deferred"]["result"].normalizer == ranks[1][mode]["deferred"]["result"].normalizer


def test_only_a_normalized_loss_skips_the_separate_collective(ranks: list[dict]) -> None:
    for rank in ranks:
        for mode in MODES:
            assert rank[mode]["separate_calls"] == 3  # compute_gradients and two steps
            assert rank[mode]["deferred_calls"] == 0


def _plain(outputs: object, micro_batch: object, normalizer: object) -> object:
    return None


def test_deferrable_only_for_a_known_mode_and_exact_gradients() -> None:
    params = [torch.nn.Parameter(torch.ones(2))]
    assert deferrable(NormalizedLoss(_plain, "token-mean"), params)
    assert not deferrable(_plain, params)
    assert not deferrable(NormalizedLoss(_plain, "unknown-mode"), params)
    assert not deferrable(NormalizedLoss(_plain, "token-mean"), [torch.nn.Parameter(torch.ones(2).bfloat16())])
    # rl-core's objectives say so themselves: no wrapper restating their mode.
    assert deferrable(PolicyObjective(aggregation="seq-mean-token-mean"), params)
    assert deferrable(ValueObjective(aggregation="token-mean"), params)


def test_counts_past_float32s_exact_range_come_back_exact() -> None:
    tokens = 2**25 + 3
    counts = DeferredCounts.of(torch.ones(1, 1), rank=1, world_size=2)
    big = DeferredCounts.of(torch.ones(1, 1), rank=0, world_size=2).riders.clone()
    big[0], big[1] = tokens // 4096, tokens % 4096
    summed = (big + counts.riders).float()  # as the all-reduce sums them, in float32
    assert counts.provisional == PROVISIONAL
    normalizer, scale = NormalizedLoss(_plain, "token-mean").rescale(counts.provisional, *counts.counts(summed))
    assert normalizer == LossNormalizer(tokens + 1, 2, 1)
    assert scale == pytest.approx(1 / (tokens + 1))
    assert PolicyObjective().rescale(counts.provisional, *counts.counts(summed)) == (normalizer, scale)


def test_no_response_token_on_any_rank_is_refused() -> None:
    counts = DeferredCounts.of(torch.zeros(2, 3), rank=0, world_size=1)
    with pytest.raises(BatchError, match="no response tokens on any rank"):
        counts.counts(counts.riders)
