"""rl-runtime's step metrics against verl 0.9.1's `metric_utils` and `log_seqlen_unbalance` on random batches.

verl lays a sample out as `prompts` (B, P) left-padded and `responses` (B, R) right-padded; we carry one
(B, P + R) row with `response_mask` marking the response, so the same numbers are laid out both ways here.
Run in the verl environment with rl-core and rl-runtime installed (`pip install --no-deps -e packages/rl-runtime`).

Deliberate differences, kept out of the parity inputs:

- Scores and rewards: verl sums `token_level_scores` over every response position, we over `response_mask`
  only; inputs keep scores at zero off the mask (as in the advantage parity tests).
- `critic/vf_explained_var` over a single response token: verl's `torch.var` warns and gives NaN; we give NaN
  without the warning. Inputs have at least two response tokens.
- The clip limits: verl reads them from the padded widths of `prompts` and `responses`; we take
  `max_prompt_length` and `max_response_length` as arguments (a (B, P + R) row has no separate widths).
- `num_turns/*` and `tool_call_counts/*` come from verl's non-tensor batch and are not computed here.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType, SimpleNamespace

import pytest
import torch

from tests.parity.conftest import PARITY_TOLERANCE

DTYPE = torch.float64
PROMPT_WIDTH = 5
RESPONSE_WIDTH = 7
SEEDS = range(4)
BATCH_SIZES = (4, 8)
TIMING = {"step": 3.5, "gen": 1.25, "reward": 0.2, "old_log_prob": 0.3, "ref": 0.4, "values": 0.35, "adv": 0.01}
TIMING_MORE = {"update_critic": 0.5, "update_actor": 0.75, "testing": 2.0}
N_GPUS = 4


def _import_or_skip(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("RL_PARITY_REQUIRED") == "1":
            pytest.fail(f"{module} is required for parity tests but failed to import: {exc}")
        pytest.skip(f"{module} not importable: {exc}")


@pytest.fixture(scope="module")
def verl_metrics() -> ModuleType:
    """verl's `verl.trainer.ppo.metric_utils`."""
    return _import_or_skip("verl.trainer.ppo.metric_utils")


@pytest.fixture(scope="module")
def ours() -> SimpleNamespace:
    """Our metric functions (private modules of `rl_core.metrics` and `rl_runtime.metrics`), in one namespace."""
    found: dict[str, object] = {}
    for module in ("rl_core.metrics._data", "rl_runtime.metrics._perf", "rl_core.metrics._batch"):
        found.update(vars(_import_or_skip(module)))
    return SimpleNamespace(**found)


def _lengths(generator: torch.Generator, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    prompt = torch.randint(1, PROMPT_WIDTH + 1, (batch_size,), generator=generator)
    response = torch.randint(0, RESPONSE_WIDTH + 1, (batch_size,), generator=generator)
    # Make sure every case shows up: a clipped prompt and response, an aborted (empty) response, two live ones.
    prompt[0], response[0] = PROMPT_WIDTH, RESPONSE_WIDTH
    response[1] = 0
    response[2] = max(int(response[2]), 2)
    return prompt, response


def _verl_layout(seed: int, batch_size: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    prompt_len, response_len = _lengths(generator, batch_size)
    columns = torch.arange(PROMPT_WIDTH)
    prompt_mask = (columns >= PROMPT_WIDTH - prompt_len[:, None]).long()  # left padding
    response_mask = (torch.arange(RESPONSE_WIDTH) < response_len[:, None]).long()  # right padding

    def noise() -> torch.Tensor:
        return torch.randn(batch_size, RESPONSE_WIDTH, generator=generator, dtype=DTYPE)

    scores = noise() * response_mask
    return {
        "prompts": torch.randint(3, 100, (batch_size, PROMPT_WIDTH), generator=generator) * prompt_mask,
        "responses": torch.randint(3, 100, (batch_size, RESPONSE_WIDTH), generator=generator) * response_mask,
        "attention_mask": torch.cat([prompt_mask, response_mask], dim=1),
        "response_mask": response_mask,
        "token_level_scores": scores,
        "token_level_rewards": scores - 0.1 * noise().abs() * response_mask,
        # Junk off the mask on purpose: both sides must mask these.
        "advantages": noise(),
        "returns": noise(),
        "values": noise(),
    }


def _our_layout(verl_batch: dict[str, torch.Tensor], with_lengths: bool) -> dict[str, torch.Tensor]:
    batch_size = verl_batch["prompts"].shape[0]

    def full_row(tensor: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.zeros(batch_size, PROMPT_WIDTH, dtype=tensor.dtype), tensor], dim=1)

    names = ("response_mask", "token_level_scores", "token_level_rewards", "advantages", "returns", "values")
    ours = {name: full_row(verl_batch[name]) for name in names}
    ours["attention_mask"] = verl_batch["attention_mask"]
    if with_lengths:
        ours["prompt_len"] = verl_batch["attention_mask"][:, :PROMPT_WIDTH].sum(-1)
        ours["response_len"] = verl_batch["response_mask"].sum(-1)
    return ours


def _data_proto(batch: dict[str, torch.Tensor]) -> object:
    from verl import DataProto

    proto = DataProto.from_dict(tensors=batch)
    proto.meta_info["global_token_num"] = batch["attention_mask"].sum(-1).tolist()
    return proto


def _assert_same(actual: dict[str, float], expected: dict[str, float]) -> None:
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        assert actual[name] == pytest.approx(float(value), rel=PARITY_TOLERANCE, abs=PARITY_TOLERANCE, nan_ok=True), (
            name
        )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("batch_size", BATCH_SIZES)
@pytest.mark.parametrize("with_lengths", [True, False], ids=["lengths", "masks"])
@pytest.mark.parametrize("use_critic", [True, False], ids=["critic", "no_critic"])
def test_data_metrics_match_verl(
    verl_metrics: ModuleType, ours: SimpleNamespace, seed: int, batch_size: int, with_lengths: bool, use_critic: bool
) -> None:
    verl_batch = _verl_layout(seed, batch_size)
    expected = verl_metrics.compute_data_metrics(_data_proto(verl_batch), use_critic=use_critic)
    actual = ours.compute_data_metrics(
        _our_layout(verl_batch, with_lengths),
        max_prompt_length=PROMPT_WIDTH,
        max_response_length=RESPONSE_WIDTH,
        use_critic=use_critic,
    )
    _assert_same(actual, expected)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("timing", [TIMING, {**TIMING, **TIMING_MORE}], ids=["some", "all"])
def test_timing_and_throughput_match_verl(
    verl_metrics: ModuleType, ours: SimpleNamespace, seed: int, timing: dict[str, float]
) -> None:
    verl_batch = _verl_layout(seed, 8)
    proto = _data_proto(verl_batch)
    batch = _our_layout(verl_batch, with_lengths=False)
    prompt_tokens, response_tokens = ours.token_counts(batch)
    timings = {f"timing_s/{name}": seconds for name, seconds in timing.items()}
    _assert_same(
        ours.compute_timing_metrics(timings, num_prompt_tokens=prompt_tokens, num_response_tokens=response_tokens),
        verl_metrics.compute_timing_metrics(proto, timing),
    )
    _assert_same(
        ours.compute_throughput_metrics(
            total_num_tokens=ours.count_tokens(batch), step_seconds=timings["timing_s/step"], n_gpus=N_GPUS
        ),
        verl_metrics.compute_throughout_metrics(proto, timing, N_GPUS),
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_global_seqlen_matches_verl(ours: SimpleNamespace, seed: int, ranks: int) -> None:
    balancing = _import_or_skip("verl.utils.seqlen_balancing")
    generator = torch.Generator().manual_seed(seed)
    seqlens = torch.randint(1, 200, (16,), generator=generator).tolist()
    partitions = balancing.get_seqlen_balanced_partitions(seqlens, k_partitions=ranks, equal_size=True)
    expected = balancing.log_seqlen_unbalance(seqlen_list=seqlens, partitions=partitions, prefix="global_seqlen")
    balanced = [sum(seqlens[index] for index in partition) for partition in partitions]
    _assert_same(ours.global_seqlen_metrics(ours.contiguous_rank_tokens(seqlens, ranks), balanced), expected)


def test_all_aborted_batch_matches_verl(verl_metrics: ModuleType, ours: SimpleNamespace) -> None:
    verl_batch = _verl_layout(0, 4)
    for name in ("response_mask", "responses", "token_level_scores", "token_level_rewards"):
        verl_batch[name] = torch.zeros_like(verl_batch[name])
    verl_batch["attention_mask"][:, PROMPT_WIDTH:] = 0
    expected = verl_metrics.compute_data_metrics(_data_proto(verl_batch), use_critic=True)
    actual = ours.compute_data_metrics(
        _our_layout(verl_batch, with_lengths=False), max_prompt_length=PROMPT_WIDTH, max_response_length=RESPONSE_WIDTH
    )
    _assert_same(actual, expected)
