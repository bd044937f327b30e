"""BatchPlan: per-rank numbers worked out by hand, every refusal with its message, and divisibility properties."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_runtime.config import BatchPlan, ConfigError, RunConfig, config_from_dict


def _plan(**kwargs: int) -> BatchPlan:
    settings_ = {
        "prompts_per_step": 4,
        "samples_per_prompt": 4,
        "mini_batches_per_step": 2,
        "ppo_epochs": 3,
        "max_tokens_per_micro_batch": 256,
        "max_prompt_length": 32,
        "max_response_length": 32,
        "rollout_dp": 2,
        "train_dp": 4,
    }
    return BatchPlan(**{**settings_, **kwargs})


def test_resolved_numbers_by_hand() -> None:
    plan = _plan()
    # 4 prompts x 4 samples = 16; rollout dp 2 -> 2 prompts (8 samples) per rank; train dp 4 -> 4 per rank;
    # 2 mini-batches of 8 samples (2 per rank); 2 mini-batches x 3 epochs = 6 optimizer steps;
    # 256 tokens hold 4 sequences of 32 + 32, so a rank's 2-sample mini-batch is 1 micro-batch at worst.
    assert plan.samples_per_step == 16
    assert (plan.prompts_per_rollout_rank, plan.samples_per_rollout_rank) == (2, 8)
    assert plan.samples_per_train_rank == 4
    assert (plan.mini_batch_size, plan.mini_batch_size_per_rank) == (8, 2)
    assert plan.optimizer_steps_per_step == 6
    assert plan.max_sequence_length == 64
    assert plan.max_micro_batches_per_mini_batch == 1


def test_tight_token_budget_needs_one_micro_batch_per_sequence() -> None:
    # 100 tokens fit one 64-token sequence; 8 samples / 1 rank / 2 mini-batches = 4 per mini-batch -> 4 micro-batches.
    plan = _plan(prompts_per_step=2, max_tokens_per_micro_batch=100, rollout_dp=1, train_dp=1)
    assert plan.mini_batch_size_per_rank == 4
    assert plan.max_micro_batches_per_mini_batch == 4


def test_samples_that_cannot_split_over_train_ranks() -> None:
    message = (
        r"batch.prompts_per_step: expected samples per step divisible by the train dp=5, found prompts_per_step=6 "
        r"x samples_per_prompt=4 = 24 samples, which cannot split over train dp=5; use a multiple of 5, "
        r"e.g. prompts_per_step=10"
    )
    with pytest.raises(ConfigError, match=message):
        _plan(prompts_per_step=6, rollout_dp=1, train_dp=5)


def test_suggested_prompts_satisfy_rollout_and_train_at_once() -> None:
    # train dp 6 with 4 samples per prompt needs prompts in multiples of 3; rollout dp 4 needs multiples of 4.
    with pytest.raises(ConfigError, match=r"use a multiple of 3, e.g. prompts_per_step=12"):
        _plan(prompts_per_step=5, rollout_dp=4, train_dp=6)


def test_prompts_that_cannot_split_over_rollout_ranks() -> None:
    message = (
        r"batch.prompts_per_step: expected a multiple of the rollout dp=3 \(each rollout rank samples whole groups\), "
        r"found prompts_per_step=4, which cannot split over rollout dp=3; use a multiple of 3, e.g. prompts_per_step=6"
    )
    with pytest.raises(ConfigError, match=message):
        _plan(rollout_dp=3, train_dp=1)


def test_mini_batches_that_do_not_divide_a_rank_share() -> None:
    message = (
        r"batch.mini_batches_per_step: expected a divisor of the 4 samples each of the train dp=4 ranks holds, "
        r"found mini_batches_per_step=3: 16 samples / train dp=4 = 4 per rank cannot form 3 equal mini-batches; "
        r"use one of 1, 2, 4"
    )
    with pytest.raises(ConfigError, match=message):
        _plan(mini_batches_per_step=3)


def test_token_budget_below_one_sequence() -> None:
    message = (
        r"actor.micro_batch.max_tokens_per_micro_batch: expected at least one full sequence: max_prompt_length \+ "
        r"max_response_length = 64, found max_tokens_per_micro_batch=63; raise it to at least 64"
    )
    with pytest.raises(ConfigError, match=message):
        _plan(max_tokens_per_micro_batch=63)


@pytest.mark.parametrize(
    ("setting", "path"),
    [("train_dp", "train_dp"), ("ppo_epochs", "batch.ppo_epochs"), ("max_prompt_length", "data.max_prompt_length")],
)
def test_non_positive_settings_are_refused_under_their_config_path(setting: str, path: str) -> None:
    with pytest.raises(ConfigError, match=rf"{re.escape(path)}: expected an int >= 1, found 0 \(int\)"):
        _plan(**{setting: 0})


def test_all_split_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as caught:
        _plan(prompts_per_step=3, rollout_dp=2, train_dp=1, mini_batches_per_step=5, max_tokens_per_micro_batch=10)
    assert [p.path for p in caught.value.problems] == [
        "batch.prompts_per_step",
        "batch.mini_batches_per_step",
        "actor.micro_batch.max_tokens_per_micro_batch",
    ]


def test_from_config_reads_the_batch_and_data_sections(minimal_data: dict[str, Any]) -> None:
    overrides = ["batch.samples_per_prompt=2", "batch.mini_batches_per_step=4", "data.max_response_length=1024"]
    config = config_from_dict(RunConfig, minimal_data, overrides)
    plan = BatchPlan.from_config(config, rollout_dp=2, train_dp=2)
    assert (plan.samples_per_step, plan.mini_batch_size_per_rank, plan.max_sequence_length) == (16, 2, 1536)


def test_describe_is_a_table_of_settings_and_results() -> None:
    lines = _plan().describe().splitlines()
    assert lines[0] == "batch plan"
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines[1:]]
    rows = {row[0]: row[1:] for row in cells}
    assert rows["samples per step"] == ["16", "prompts x samples per prompt"]
    assert rows["prompts / samples per rank"] == ["2 / 8"]
    assert rows["samples per mini-batch"] == ["8 (2 per rank)"]
    assert rows["optimizer steps per step"] == ["6", "mini-batches x epochs"]
    assert rows["micro-batch token budget"] == ["256", "actor.micro_batch.max_tokens_per_micro_batch"]
    assert len(lines) == 15


_SETTINGS = st.fixed_dictionaries(
    {
        "prompts_per_step": st.integers(1, 64),
        "samples_per_prompt": st.integers(1, 16),
        "mini_batches_per_step": st.integers(1, 16),
        "ppo_epochs": st.integers(1, 4),
        "max_tokens_per_micro_batch": st.integers(1, 4096),
        "max_prompt_length": st.integers(1, 1024),
        "max_response_length": st.integers(1, 1024),
        "rollout_dp": st.integers(1, 16),
        "train_dp": st.integers(1, 16),
    }
)


def _expected_failures(s: dict[str, int]) -> dict[str, str]:
    """Brute force: every condition the plan must refuse, as {config path: text the message must contain}."""
    samples = s["prompts_per_step"] * s["samples_per_prompt"]
    failures = {}
    if s["prompts_per_step"] % s["rollout_dp"] != 0 or samples % s["train_dp"] != 0:
        failures["batch.prompts_per_step"] = f"prompts_per_step={s['prompts_per_step']}"
    # Mini-batches are judged on each train rank's share, so only when the share itself is whole.
    if samples % s["train_dp"] == 0 and not any(
        samples == s["train_dp"] * s["mini_batches_per_step"] * k for k in range(1, samples + 1)
    ):
        failures["batch.mini_batches_per_step"] = f"mini_batches_per_step={s['mini_batches_per_step']}"
    if s["max_tokens_per_micro_batch"] < s["max_prompt_length"] + s["max_response_length"]:
        failures["actor.micro_batch.max_tokens_per_micro_batch"] = (
            f"max_tokens_per_micro_batch={s['max_tokens_per_micro_batch']}"
        )
    return failures


@settings(max_examples=400, deadline=None)
@given(_SETTINGS)
def test_a_valid_plan_resolves_to_whole_numbers_that_multiply_back(s: dict[str, int]) -> None:
    expected = _expected_failures(s)
    try:
        plan = BatchPlan(**s)
    except ConfigError as exc:
        found = {problem.path for problem in exc.problems}
        assert found == set(expected), (found, expected)
        for problem in exc.problems:
            assert expected[problem.path] in problem.found
        return
    assert not expected
    derived = [
        plan.samples_per_step,
        plan.prompts_per_rollout_rank,
        plan.samples_per_rollout_rank,
        plan.samples_per_train_rank,
        plan.mini_batch_size,
        plan.mini_batch_size_per_rank,
        plan.optimizer_steps_per_step,
        plan.max_micro_batches_per_mini_batch,
    ]
    assert all(type(value) is int and value >= 1 for value in derived)
    samples = s["prompts_per_step"] * s["samples_per_prompt"]
    assert plan.prompts_per_rollout_rank * s["rollout_dp"] == s["prompts_per_step"]
    assert plan.samples_per_rollout_rank * s["rollout_dp"] == samples
    assert plan.samples_per_train_rank * s["train_dp"] == samples
    assert plan.mini_batch_size * s["mini_batches_per_step"] == samples
    assert plan.mini_batch_size_per_rank * s["mini_batches_per_step"] * s["train_dp"] == samples
    assert plan.optimizer_steps_per_step == s["mini_batches_per_step"] * s["ppo_epochs"]
    per_micro_batch = s["max_tokens_per_micro_batch"] // plan.max_sequence_length
    assert (plan.max_micro_batches_per_mini_batch - 1) * per_micro_batch < plan.mini_batch_size_per_rank
    assert plan.max_micro_batches_per_mini_batch * per_micro_batch >= plan.mini_batch_size_per_rank


@settings(max_examples=300, deadline=None)
@given(_SETTINGS)
def test_every_suggested_fix_resolves_its_problem(s: dict[str, int]) -> None:
    s = {**s, "max_tokens_per_micro_batch": 4096, "max_prompt_length": 1, "max_response_length": 1}
    try:
        BatchPlan(**s)
    except ConfigError as exc:
        for problem in exc.problems:
            if problem.path == "batch.prompts_per_step":
                suggested = int(re.search(r"e\.g\. prompts_per_step=(\d+)", problem.fix).group(1))  # type: ignore[union-attr]
                assert suggested >= s["prompts_per_step"]
                assert suggested % s["rollout_dp"] == 0
                assert suggested * s["samples_per_prompt"] % s["train_dp"] == 0
            else:
                options = [int(x) for x in re.findall(r"\d+", problem.fix.removeprefix("use one of "))]
                assert options
                per_rank = s["prompts_per_step"] * s["samples_per_prompt"] // s["train_dp"]
                assert all(per_rank % option == 0 for option in options)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8), st.integers(1, 8), st.integers(1, 3), st.integers(1, 4))
def test_plans_built_to_divide_always_validate(
    rollout_dp: int, train_dp: int, mini_batches: int, samples_per_prompt: int, multiple: int, epochs: int
) -> None:
    # The smallest prompt count that both stages and every mini-batch split evenly, times `multiple`.
    per_step = mini_batches * train_dp
    prompts = math.lcm(rollout_dp, per_step // math.gcd(samples_per_prompt, per_step)) * multiple
    plan = _plan(
        prompts_per_step=prompts,
        samples_per_prompt=samples_per_prompt,
        mini_batches_per_step=mini_batches,
        ppo_epochs=epochs,
        rollout_dp=rollout_dp,
        train_dp=train_dp,
    )
    assert plan.mini_batch_size_per_rank * mini_batches * train_dp == prompts * samples_per_prompt
    assert plan.prompts_per_rollout_rank * rollout_dp == prompts
    assert plan.optimizer_steps_per_step == mini_batches * epochs
