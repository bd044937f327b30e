"""`rl-recipes rm`: the Bradley-Terry loss by hand, preference data and its errors, and the command end to end
writing a folder the run config's reward_model section loads."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_engines.reward_model import RewardModelConfig, RewardModelScorer, check_reward_model
from rl_engines.training import ModelConfig
from rl_recipes.cli import main
from rl_recipes.embedded import build_embedded_tokenizer, save_embedded_tokenizer
from rl_recipes.rm import (
    SUMMARY_FILE,
    PreferenceDataError,
    bradley_terry_loss,
    encode_pair,
    generate_math_pairs,
    load_pairs,
    pairwise_accuracy,
    wrong_answer,
)


def test_bradley_terry_loss_by_hand() -> None:
    chosen = torch.tensor([1.0, 0.0], requires_grad=True)
    rejected = torch.tensor([0.0, 0.0])
    loss = bradley_terry_loss(chosen, rejected)
    # -log sigmoid(1) = log(1 + e^-1) = 0.3132617, -log sigmoid(0) = log 2 = 0.6931472; their mean:
    assert loss.item() == pytest.approx((0.3132617 + 0.6931472) / 2, abs=1e-6)
    loss.backward()
    # d/dc of -log sigmoid(c - r) is -sigmoid(r - c), divided by the 2 pairs: -0.2689414 / 2 and -0.5 / 2.
    assert chosen.grad is not None
    assert chosen.grad.tolist() == pytest.approx([-0.1344707, -0.25], abs=1e-6)
    assert pairwise_accuracy(chosen.detach(), rejected) == 0.5


@settings(deadline=None)  # a loaded CI machine may stall an example; the property is what counts
@given(st.lists(st.tuples(st.floats(-20, 20), st.floats(-20, 20)), min_size=1, max_size=8))
def test_swapping_the_pair_changes_the_loss_by_the_mean_margin(scores: list[tuple[float, float]]) -> None:
    chosen = torch.tensor([c for c, _ in scores], dtype=torch.float64)
    rejected = torch.tensor([r for _, r in scores], dtype=torch.float64)
    # -log s(x) + log s(-x) = -x, so BT(c, r) - BT(r, c) = -mean(c - r)
    difference = bradley_terry_loss(chosen, rejected) - bradley_terry_loss(rejected, chosen)
    assert difference.item() == pytest.approx(-(chosen - rejected).mean().item(), abs=1e-9)


def test_generated_pairs_prefer_the_correct_answer() -> None:
    train, heldout = generate_math_pairs(30, 10, seed=0)
    assert len(train) == 30 and len(heldout) == 10
    assert not {pair.prompt for pair in train} & {pair.prompt for pair in heldout}
    for pair in train:
        a, op, b = pair.prompt.removeprefix("What is ").removesuffix("?").split()
        result = int(a) + int(b) if op == "+" else int(a) - int(b)
        assert pair.chosen == f"{a} {op} {b} = {result} #### {result}" and pair.rejected != pair.chosen
    rng = random.Random(0)
    kinds = {wrong_answer("2 + 3 = 5 #### 5", rng).count("####") for _ in range(20)}
    assert kinds == {0, 1}  # both kinds: the final answer dropped, a wrong result


def test_encoded_pairs_are_the_prompt_then_the_response_and_eos() -> None:
    tokenizer = build_embedded_tokenizer()
    chosen, rejected = encode_pair(generate_math_pairs(1, 1, seed=0)[0][0], tokenizer)
    assert chosen[-1] == rejected[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(chosen, skip_special_tokens=True).startswith("Question: What is ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"holds no pairs"),
        ('{"prompt": "q", "chosen": "a"}\n', r"pairs.jsonl:1: field 'rejected' is missing"),
        ('{"prompt": "q", "chosen": "a", "rejected": "b"}\n\n{"prompt": "q", "chosen": 3, "rejected": "b"}\n',
         r"pairs.jsonl:3: field 'chosen' is 3 \(int\), expected non-empty text"),
        ("[1, 2]\n", r"pairs.jsonl:1: expected a JSON object"),
        ("{oops\n", r"pairs.jsonl:1: not a JSON object"),
    ],
)  # fmt: skip
def test_bad_preference_files_name_the_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(text)
    with pytest.raises(PreferenceDataError, match=message):
        load_pairs(path)


def test_a_bad_file_is_one_error_line_from_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"prompt": "q", "rejected": "b"}\n')
    assert main(["rm", f"train_file={path}", f"output_dir={tmp_path / 'out'}"]) == 2
    assert "pairs.jsonl:1: field 'chosen' is missing" in capsys.readouterr().err


def test_the_command_trains_a_folder_the_reward_model_section_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rm"
    overrides = ["steps=2", "pairs=16", "heldout_pairs=8", "batch_size=8", f"output_dir={out}"]
    assert main(["rm", *overrides]) == 0
    assert "held-out pairwise accuracy" in capsys.readouterr().out
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["steps"] == 2 and summary["train_pairs"] == 16 and summary["heldout_pairs"] == 8
    assert 0 <= summary["heldout_accuracy"] <= 1 and math.isfinite(summary["final_loss"])
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    assert len(load_pairs(out / "data" / "train.jsonl")) == 16
    policy_tokenizer = save_embedded_tokenizer(build_embedded_tokenizer(), tmp_path / "policy")
    config = RewardModelConfig(path=str(out / "model"))
    check_reward_model(config, ModelConfig(tokenizer_path=str(policy_tokenizer), hf_config={"model_type": "llama"}))
    scores = RewardModelScorer.from_config(config).score_ids([[1, 10, 11, 2], [1, 12, 2]]).scores
    assert scores.shape == (2,) and torch.isfinite(scores).all()


def test_help_lists_the_fields_and_a_bad_value_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["rm", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "steps = 60" in out and "e.g. steps=100" in out
    assert main(["rm", "steps=0"]) == 2
    assert "steps: expected an int >= 1" in capsys.readouterr().err
